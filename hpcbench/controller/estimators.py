"""The controller's bandwidth estimators by name (the ``stellatrain`` policy's ``estimator`` key)."""

from __future__ import annotations

from hpcbench.controller.bandwidth import BandwidthEstimator
from hpcbench.controller.delivered import DeliveredBandwidthEstimator
from hpcbench.runtime.registry import Registry

__all__ = ["ESTIMATORS"]

#: name -> estimator class (``observe(records)``, ``estimate() -> BandwidthEstimate``, ``estimate_bps``)
ESTIMATORS: Registry[type] = Registry("bandwidth estimator", {
    "delivered": DeliveredBandwidthEstimator,
    "stellatrain": BandwidthEstimator,
})

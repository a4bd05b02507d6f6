"""The controller's bandwidth estimators by name (the ``stellatrain`` policy's ``estimator`` section).

An estimator is a class with ``observe(records)``, ``estimate() -> BandwidthEstimate`` and ``estimate_bps``,
declaring its constructor's keywords as its ``Config``; a config names it as a section
``{name: NAME, ...its options}`` (or by its name alone), validated by :data:`ESTIMATOR_SECTION`.
"""

from __future__ import annotations

from hpcbench.controller.bandwidth import BandwidthEstimator
from hpcbench.controller.delivered import DeliveredBandwidthEstimator
from pydantic import TypeAdapter

from hpcbench.runtime.config import strategy_section
from hpcbench.runtime.registry import Registry

__all__ = ["ESTIMATORS", "ESTIMATOR_SECTION"]

#: name -> estimator class (``observe(records)``, ``estimate() -> BandwidthEstimate``, ``estimate_bps``)
ESTIMATORS: Registry[type] = Registry("bandwidth estimator", {
    "delivered": DeliveredBandwidthEstimator,
    "stellatrain": BandwidthEstimator,
})

#: validates one ``estimator`` section (``{name: NAME, ...}`` or a name) into that estimator's ``Config``
ESTIMATOR_SECTION = TypeAdapter(strategy_section(ESTIMATORS, "estimator")[0])

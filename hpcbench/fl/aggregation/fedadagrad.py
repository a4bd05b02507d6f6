"""FedAdagrad [Reddi et al., ICLR 2021]."""

from __future__ import annotations

import numpy as np

from hpcbench.fl.aggregation.fedopt import FedOpt

__all__ = ["FedAdagrad"]


class FedAdagrad(FedOpt):
    """:class:`FedOpt` with Adagrad's second moment, ``v_t = v_{t-1} + Delta_t^2``.

    ``beta2`` is unused and ``v`` is a sum, so bias correction applies to ``m`` only.
    """

    corrects_v = False

    def second_moment(self, v: np.ndarray, delta_sq: np.ndarray) -> np.ndarray:
        """Running sum of the squared update."""
        return v + delta_sq

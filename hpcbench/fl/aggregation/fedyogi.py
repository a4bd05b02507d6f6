"""FedYogi [Reddi et al., ICLR 2021; Yogi: Zaheer et al., NeurIPS 2018]."""

from __future__ import annotations

import numpy as np

from hpcbench.fl.aggregation.fedopt import FedOpt

__all__ = ["FedYogi"]


class FedYogi(FedOpt):
    """:class:`FedOpt` with Yogi's second moment, ``v_t = v_{t-1} - (1 - beta2) Delta_t^2 sign(v_{t-1} - Delta_t^2)``.

    ``v`` moves towards ``Delta_t^2`` by an additive step, so it grows no
    faster than Adam's but cannot collapse after one large update.
    """

    def second_moment(self, v: np.ndarray, delta_sq: np.ndarray) -> np.ndarray:
        """Yogi's additive update of the second moment."""
        return v - (1.0 - self.config.beta2) * delta_sq * np.sign(v - delta_sq)

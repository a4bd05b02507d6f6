"""FedAdam [Reddi et al., ICLR 2021]."""

from __future__ import annotations

import numpy as np

from hpcbench.fl.aggregation.fedopt import FedOpt

__all__ = ["FedAdam"]


class FedAdam(FedOpt):
    """:class:`FedOpt` with Adam's second moment, ``v_t = beta2 v_{t-1} + (1 - beta2) Delta_t^2``."""

    def second_moment(self, v: np.ndarray, delta_sq: np.ndarray) -> np.ndarray:
        """Exponential average of the squared update."""
        b2 = self.config.beta2
        return b2 * v + (1.0 - b2) * delta_sq

"""q-FedAvg [Li, Sanjabi, Beirami, Smith, "Fair Resource Allocation in Federated Learning", ICLR 2020]."""

from __future__ import annotations

import numpy as np
from pydantic import Field

from hpcbench.fl.contracts import Aggregator, ClientUpdates, StrategyConfig

__all__ = ["QFedAvg"]


class QFedAvg(Aggregator):
    """q-FedAvg (Li et al. 2020, Algorithm 2): minimise ``sum_k p_k F_k^(q+1) / (q+1)``.

    With ``L = 1 / lr`` (the round's client learning rate, the Lipschitz
    estimate of the paper), client ``k``'s update as a gradient
    ``g_k = L (w - w_k) = -delta_k / lr`` and ``F_k`` the loss of the global
    model ``w`` on the client's local training data (reported by the
    executor before local training)::

        Delta_k = F_k^q g_k
        h_k     = q F_k^(q-1) ||g_k||^2 + L F_k^q
        w      <- w - sum_k Delta_k / sum_k h_k

    ``q = 0`` is the unweighted mean of the clients' updates; larger ``q``
    gives clients with a high loss more weight (fairness).

    Parameters
    ----------
    config : QFedAvg.Config
        ``q`` >= 0 (default 1.0).
    """

    class Config(StrategyConfig):
        """q-FedAvg: fairness exponent ``q`` >= 0."""

        q: float = Field(1.0, ge=0, le=100, allow_inf_nan=False)
        """fairness exponent q (0: FedAvg-like, larger: more weight on high-loss clients)"""

    needs_global_loss = True
    accepts_pseudo_gradient = False  # F_k and ||g_k|| are per client: FedBuff's buffered sum has neither

    def aggregate(self, global_params: np.ndarray, deltas: np.ndarray, updates: ClientUpdates,
                  round_: int) -> np.ndarray:
        """One q-FedAvg step (float64 sums in client order); returns float32 parameters of shape (P,).

        Raises
        ------
        ValueError
            No updates, or a client's ``F_k`` is not a positive finite number.
        """
        q = self.config.q
        big_l = 1.0 / updates.learning_rate
        loss = np.asarray(updates.global_loss, dtype=np.float64)
        if len(deltas) == 0:
            raise ValueError("no client updates to aggregate")
        if not np.all(np.isfinite(loss) & (loss > 0)):
            raise ValueError(f"q-FedAvg needs each client's positive loss at the global model, got {loss.tolist()}")
        num = np.zeros(deltas.shape[1], dtype=np.float64)
        den = 0.0
        for f, d in zip(loss, deltas):
            g = -big_l * d.astype(np.float64)
            fq = f ** q
            num += fq * g
            den += (q * f ** (q - 1) * float(g @ g) if q else 0.0) + big_l * fq
        return (global_params.astype(np.float64) - num / den).astype(np.float32)

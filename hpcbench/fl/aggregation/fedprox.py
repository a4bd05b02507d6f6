"""FedProx [Li et al., "Federated Optimization in Heterogeneous Networks", MLSys 2020]."""

from __future__ import annotations

from pydantic import Field

from hpcbench.fl.aggregation.fedavg import FedAvg

__all__ = ["FedProx"]


class FedProx(FedAvg):
    """FedAvg's server update with a proximal term in every client's local objective.

    Each client minimises ``F_k(w) + mu/2 ||w - w_global||^2`` (Li et al. 2020,
    eq. 2), so its gradient gains ``mu (w - w_global)``, pulling local models
    back towards the round's global model. FedScale's client optimizer adds
    this term to the gradient with the opposite sign (pushing away from the
    global model); hpcbench follows the paper. The server side is FedAvg's
    example-weighted average.

    Parameters
    ----------
    config : FedProx.Config
        ``mu`` (default 0.1, FedScale's ``proxy_mu``) and ``server_learning_rate``.
    """

    class Config(FedAvg.Config):
        """FedProx: proximal coefficient ``mu`` >= 0 (0 gives FedAvg)."""

        mu: float = Field(0.1, ge=0, le=1e6, allow_inf_nan=False)
        """weight of the clients' proximal term mu/2 ||w - w_global||^2"""

    def client_regulariser(self):
        """``mu/2 * sum_j ||p_j - g_j||^2`` over the trainable tensors (None when ``mu == 0``)."""
        mu = self.config.mu
        if mu == 0:
            return None

        def proximal(params, global_params):
            total = None
            for p, g in zip(params, global_params):
                term = (p - g).pow(2).sum()
                total = term if total is None else total + term
            return 0.5 * mu * total

        return proximal

    def client_regulariser_gradient(self):
        """``mu (w - w_global)``, the proximal term's gradient, on a numpy stack (None when ``mu == 0``)."""
        mu = self.config.mu
        if mu == 0:
            return None

        def gradient(params, global_params):
            return (params - global_params) * params.dtype.type(mu)

        return gradient

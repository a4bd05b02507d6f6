"""Adaptive server optimizers (the FedOpt family) [Reddi et al., "Adaptive Federated Optimization", ICLR 2021]."""

from __future__ import annotations

from abc import abstractmethod
from typing import Any, Mapping

import numpy as np
from pydantic import Field

from hpcbench.fl.aggregation.fedavg import Weighting, client_weights, weighted_average
from hpcbench.fl.contracts import Aggregator, ClientUpdates, StrategyConfig

__all__ = ["FedOpt"]


class FedOpt(Aggregator):
    """Server-side Adam-like step on the averaged client update (Reddi et al. 2021, Algorithm 2).

    With ``Delta_t`` the example-weighted mean of the round's updates (local
    minus global parameters), every round::

        m_t = beta1 m_{t-1} + (1 - beta1) Delta_t
        v_t = second_moment(v_{t-1}, Delta_t^2)          # Adagrad, Adam or Yogi
        w_{t+1} = w_t + eta * m_t / (sqrt(v_t) + tau)

    with ``m_0 = 0`` and ``v_0 = tau^2`` (the paper's ``v_{-1} >= tau^2``).
    With ``bias_correction`` (FedScale's choice) ``m_t`` and ``v_t`` are
    divided by ``1 - beta1^t`` and ``1 - beta2^t`` (Adam's correction; never
    for Adagrad's sum). The paper and Flower use none. FedScale's defaults
    (``eta`` 3e-3, ``tau`` 1e-8) are the defaults here; Flower's (``eta`` 1e-2,
    ``tau`` 1e-3, no bias correction) are a config away. Reddi et al. and
    FedScale average the updates uniformly (``weighting: uniform``); the
    default weights them by example count, as FedAvg.
    State (``m``, ``v``, ``t``) is float64 and explicit (:meth:`state_dict`).

    Parameters
    ----------
    config : FedOpt.Config
    """

    class Config(StrategyConfig):
        """Adaptive server optimizer: server learning rate ``eta``, ``beta1``, ``beta2``, ``tau``."""

        eta: float = Field(3e-3, gt=0, le=100, allow_inf_nan=False)
        """server learning rate (FedScale 3e-3, Flower 1e-2)"""
        beta1: float = Field(0.9, ge=0, lt=1)
        """decay of the first moment m"""
        beta2: float = Field(0.99, ge=0, lt=1)
        """decay of the second moment v (FedAdagrad: unused)"""
        tau: float = Field(1e-8, gt=0, le=1, allow_inf_nan=False)
        """adaptivity: added to sqrt(v) (FedScale 1e-8, Flower 1e-3)"""
        bias_correction: bool = True
        """divide m and v by 1 - beta^t as Adam"""
        weighting: Weighting = "examples"
        """examples: average the updates weighted by example count; uniform: all alike (Reddi et al., FedScale)"""

    #: whether ``v`` is an exponential average that Adam's bias correction applies to
    corrects_v = True

    def __init__(self, config: "FedOpt.Config") -> None:
        super().__init__(config)
        self.m: np.ndarray | None = None
        self.v: np.ndarray | None = None
        self.t = 0

    @abstractmethod
    def second_moment(self, v: np.ndarray, delta_sq: np.ndarray) -> np.ndarray:
        """Next ``v`` from the previous one and the squared averaged update (float64, shape (P,))."""

    def aggregate(self, global_params: np.ndarray, deltas: np.ndarray, updates: ClientUpdates,
                  round_: int) -> np.ndarray:
        """One server step; returns the new global parameters (float32, shape (P,))."""
        c = self.config
        delta = weighted_average(deltas, client_weights(updates, c.weighting))
        if self.m is None:
            self.m = np.zeros_like(delta)
            self.v = np.full_like(delta, c.tau * c.tau)
        self.t += 1
        self.m = c.beta1 * self.m + (1.0 - c.beta1) * delta
        self.v = self.second_moment(self.v, delta * delta)
        m_hat, v_hat = self.m, self.v
        if c.bias_correction:
            m_hat = self.m / (1.0 - c.beta1 ** self.t)
            if self.corrects_v:
                v_hat = self.v / (1.0 - c.beta2 ** self.t)
        step = c.eta * m_hat / (np.sqrt(v_hat) + c.tau)
        return (global_params.astype(np.float64) + step).astype(np.float32)

    def state_dict(self) -> dict[str, Any]:
        """``m``, ``v`` (copies, or None before the first round) and the step count ``t``."""
        return {"m": None if self.m is None else self.m.copy(),
                "v": None if self.v is None else self.v.copy(), "t": self.t}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restore :meth:`state_dict`'s output.

        Raises
        ------
        ValueError
            Missing or extra keys.
        """
        if set(state) != {"m", "v", "t"}:
            raise ValueError(f"{type(self).__name__} state needs keys m, v, t; got {sorted(state)}")
        self.m = None if state["m"] is None else np.array(state["m"], dtype=np.float64)
        self.v = None if state["v"] is None else np.array(state["v"], dtype=np.float64)
        self.t = int(state["t"])

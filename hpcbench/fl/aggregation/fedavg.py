"""Federated Averaging (FedAvg) [McMahan et al., 2017]."""

from __future__ import annotations

from typing import Literal

import numpy as np
from pydantic import Field

from hpcbench.fl.contracts import Aggregator, ClientUpdates, StrategyConfig

__all__ = ["accumulate_weighted", "weighted_average", "client_weights", "example_weights", "Weighting", "FedAvg"]

#: how client updates are weighted in the average: by local example count (McMahan et al.), or all
#: alike (FedScale's aggregator, ``fedscale/cloud/aggregation/aggregator.py``: sum / number of clients)
Weighting = Literal["examples", "uniform"]

#: columns per block of :func:`weighted_average` (256 KiB of float64: the sum and the product stay in L2)
_COLUMNS = 1 << 15


def client_weights(updates: ClientUpdates, weighting: str) -> np.ndarray:
    """Weights of the round's updates: ``num_examples`` (``examples``) or ones (``uniform``); float64, shape (m,)."""
    return example_weights(updates.num_examples, weighting)


def example_weights(num_examples: np.ndarray, weighting: str) -> np.ndarray:
    """Weights of updates with these example counts: the counts (``examples``) or ones (``uniform``).

    Parameters
    ----------
    num_examples : ndarray of shape (m,)
    weighting : str
        ``examples`` or ``uniform``.

    Returns
    -------
    ndarray of shape (m,), float64
        A new array.

    Raises
    ------
    ValueError
        If ``weighting`` is neither.
    """
    if weighting not in ("examples", "uniform"):
        raise ValueError(f"weighting must be 'examples' or 'uniform', got {weighting!r}")
    n = np.array(num_examples, dtype=np.float64)
    return n if weighting == "examples" else np.ones_like(n)


def weighted_average(deltas: np.ndarray, num_examples: np.ndarray) -> np.ndarray:
    """Example-weighted mean of client updates, ``sum_k (n_k / n) * delta_k``.

    Parameters
    ----------
    deltas : ndarray of shape (m, P), float32
        One model update (local minus global parameters) per client, in a fixed
        client order; the sum runs in that order in float64, so the same rows in
        the same order give the same bits (``sum += w_k * float64(delta_k)``,
        element by element, whatever the blocking).
    num_examples : ndarray of shape (m,), int
        Local example count ``n_k`` of each client.

    Returns
    -------
    ndarray of shape (P,), float64

    Raises
    ------
    ValueError
        If shapes disagree, ``m == 0``, or a count is negative or all are zero.
    """
    deltas = np.asarray(deltas)
    n = np.asarray(num_examples, dtype=np.float64)
    if deltas.ndim != 2 or n.shape != (deltas.shape[0],):
        raise ValueError(f"deltas must be (m, P) and num_examples (m,), got {deltas.shape} and {n.shape}")
    if deltas.shape[0] == 0:
        raise ValueError("no client updates to aggregate")
    if (n < 0).any() or n.sum() <= 0:
        raise ValueError(f"num_examples must be >= 0 with a positive sum, got {n.tolist()}")
    out = np.zeros(deltas.shape[1], dtype=np.float64)
    accumulate_weighted(out, deltas, n / n.sum())
    return out


def accumulate_weighted(total: np.ndarray, deltas: np.ndarray, weights: np.ndarray,
                        scratch: np.ndarray | None = None) -> None:
    """``total += w_k * float64(delta_k)`` for each row ``k`` in order, in place.

    In column blocks, every row in order within each: each element sees the
    same additions in the same order as one pass per row (the same bits),
    while the block's sum and product stay in cache and no (P,) temporary
    is allocated per row.

    Parameters
    ----------
    total : ndarray of shape (P,), float64
    deltas : ndarray of shape (m, P), float32
    weights : ndarray of shape (m,), float64
    scratch : ndarray of float64, optional
        Work space of at least ``min(P, 32768)`` elements (allocated when not given).
    """
    if scratch is None:
        scratch = np.empty(min(_COLUMNS, len(total)), dtype=np.float64)
    for lo in range(0, len(total), _COLUMNS):
        acc = total[lo:lo + _COLUMNS]
        tmp = scratch[:len(acc)]
        for w, d in zip(weights, deltas[:, lo:lo + _COLUMNS]):
            np.multiply(d, w, out=tmp, dtype=np.float64)
            acc += tmp


class FedAvg(Aggregator):
    """FedAvg server update: ``w <- w + eta_s * sum_k (n_k / n) * delta_k``.

    With server learning rate ``eta_s = 1`` (the default) this is McMahan et
    al.'s FedAvg, "Communication-Efficient Learning of Deep Networks from
    Decentralized Data" (AISTATS 2017): the example-weighted mean of the
    clients' local models. FedScale's aggregator takes the unweighted mean of
    the updates instead: ``weighting: uniform`` (what a FedScale job file
    translates to); the default keeps the paper's weighting.

    Parameters
    ----------
    config : FedAvg.Config
    """

    class Config(StrategyConfig):
        """FedAvg: ``server_learning_rate`` scales the averaged update (1 = plain FedAvg)."""

        server_learning_rate: float = Field(1.0, gt=0, le=100, allow_inf_nan=False)
        """server step on the weighted mean client update (1: plain FedAvg)"""
        weighting: Weighting = "examples"
        """examples: weight each update by its client's example count (the paper); uniform: all alike (FedScale)"""

    def aggregate(self, global_params: np.ndarray, deltas: np.ndarray, updates: ClientUpdates,
                  round_: int) -> np.ndarray:
        """New global parameters (float32, shape (P,)) from the round's client updates."""
        update = weighted_average(deltas, client_weights(updates, self.config.weighting))
        return (global_params.astype(np.float64) + self.config.server_learning_rate * update).astype(np.float32)

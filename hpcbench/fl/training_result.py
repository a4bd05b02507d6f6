"""What a client's local training returns, and the client learning-rate schedule (torch-free).

Shared by the torch engines (:mod:`hpcbench.fl.engines.training`,
:mod:`hpcbench.fl.engines.batched_training`) and the numpy engine
(:mod:`hpcbench.fl.engines.numpy_training`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["LocalResult", "decayed_learning_rate"]


@dataclass
class LocalResult:
    """What a client sends back after local training.

    Attributes
    ----------
    delta : ndarray of shape (P,), float32
        Local minus global parameters.
    num_examples : int
        Local dataset size (FedAvg weight).
    train_loss : float
        Mean training loss over the local steps (without any regulariser).
    utility : float
        Oort's statistical utility ``|B| sqrt(mean of squared per-example losses)``
        (Lai et al., OSDI 2021, sec. 4.2), with the mean over every example of
        every local step and ``|B| = min(num_examples, local_steps * batch_size)``
        the distinct examples trained on, as FedScale's ``trained_unique_samples``.
        FedScale's executor squares only its last minibatch's losses; this is
        the paper's definition over the whole local training.
    global_loss : float
        Mean loss of the global model on the local data before training
        (``F_k`` of q-FedAvg), or NaN when not asked for.
    train_wall_s, train_cpu_s : float
        Wall-clock and process CPU seconds spent training on this rank.
    """

    delta: np.ndarray
    num_examples: int
    train_loss: float
    utility: float
    global_loss: float
    train_wall_s: float
    train_cpu_s: float


def decayed_learning_rate(learning_rate: float, round_: int, factor: float, every: int, floor: float) -> float:
    """Client learning rate of round ``round_`` (from 1) under FedScale's step decay.

    ``lr * factor^k`` with ``k = (round_ - 1) // every`` (FedScale multiplies
    by ``decay_factor`` after every ``decay_round``-th round), never below
    ``floor`` and never above ``learning_rate`` (a ``floor`` above the initial
    rate does not raise it). ``factor == 1`` returns ``learning_rate`` exactly.
    """
    k = (round_ - 1) // every
    if factor == 1.0 or k == 0:
        return learning_rate
    return min(learning_rate, max(learning_rate * factor ** k, floor))

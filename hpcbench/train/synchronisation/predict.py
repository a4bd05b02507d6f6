"""Alpha-beta prediction of a data-parallel step, with bucket overlap.

Each bucket ``i`` becomes ready at ``f + r_i`` (forward time ``f`` plus its
ready time in backward) and its synchronisation takes ``T_i`` seconds by the
synchroniser's cost model (:meth:`hpcbench.sync.base.Synchroniser.message_time`:
an allreduce algorithm's, :func:`hpcbench.collectives.cost.predict_allreduce`,
Thakur, Rabenseifner and Gropp 2005, or one exchange with a peer). A rank's outgoing link serialises its
messages (the link model's semantics), so buckets are reduced one after the
other: ``start_i = max(f + r_i, end_{i-1})``, ``end_i = start_i + T_i``. The
optimizer runs once backward and the last bucket are done:

    step = max(f + b, end_last) + o,    efficiency = (f + b + o) / step

(``b`` backward, ``o`` optimizer time). Model averaging starts at the step's
start with the whole model: ``step = max(f + b, T_model) + o``.

Under ``schedule: priority`` the step is that of
:func:`hpcbench.train.synchronisation.priority.predict_priority_step` instead.

Serialising whole buckets is exact for algorithms that keep every rank's
outgoing link busy through the operation (ring, Rabenseifner). It is
pessimistic for those that leave links idle in some phases (``star``,
``tree``: the root's results go out while the leaves already send the next
bucket), whose consecutive buckets overlap in a real run: measured there,
efficiency can beat the prediction.
"""

from __future__ import annotations

import math
from typing import Callable

import numpy as np

__all__ = ["link_cost", "predict_step"]


def link_cost(sync, world_size: int, alpha_s: float, beta_s_per_byte: float,
              ranks_per_host=()) -> Callable[[int], float] | None:
    """``nbytes -> seconds`` of one synchronisation by ``sync`` on ``world_size`` workers over a link of ``alpha_s``,
    ``beta_s_per_byte``; None where there is nothing to predict (no cost model, or a link without one
    alpha-beta pair: NaN).

    Parameters
    ----------
    sync : hpcbench.sync.base.Synchroniser or its class
        An instance's own config is used (e.g. SMA's algorithm); a class's defaults.
    ranks_per_host : tuple of int, optional
        With several hosts and a link modelled between hosts only: the two-level model
        (:meth:`hpcbench.sync.base.Synchroniser.message_time`); () prices every message on the link.
    """
    if sync.cost_model is None or not (math.isfinite(alpha_s) and math.isfinite(beta_s_per_byte)):
        return None
    config = sync.config if not isinstance(sync, type) else sync.Config()
    hosts = tuple(ranks_per_host)
    return lambda nbytes: sync.message_time(config, int(nbytes), world_size, alpha_s, beta_s_per_byte, hosts)


def predict_step(profile, bucket_bytes, bucket_ready_s, message_time: Callable[[int], float] | None,
                 averages: str = "gradients", schedule: str = "fifo",
                 bucket_need_s=None, mix_s: float = 0.0) -> tuple[float, float, float]:
    """Predicted step time, efficiency (compute / step) and communication time per step.

    Parameters
    ----------
    profile : hpcbench.train.steps.profile.ComputeProfile
    bucket_bytes, bucket_ready_s : array_like, shape (n_buckets,)
        Bucket sizes in bytes, and when each is ready from the start of backward (seconds).
    message_time : callable or None
        ``nbytes -> seconds`` of one synchronisation (:func:`link_cost`);
        None gives ``(nan, nan, nan)``.
    averages : {"gradients", "models"}
    schedule : {"fifo", "priority"}
        ``"priority"``: :func:`hpcbench.train.synchronisation.priority.predict_priority_step`
        (gradients only), which needs ``bucket_need_s``.
    mix_s : float
        ``"models"``: the synchroniser's mixing after the exchange, seconds
        (:meth:`hpcbench.sync.base.Synchroniser.mix_memory_s`); with the copy of
        the model into the send buffer before it (``profile.copy_s``) it
        lengthens the step as it does on the worker, outside the overlap.
    bucket_need_s : array_like, shape (n_buckets,), optional
        When the next forward first needs each bucket (seconds from its start).

    Returns
    -------
    (float, float, float)
        Step seconds, efficiency in [0, 1], and the seconds of all the step's
        reductions one after the other (what a step without overlap spends
        communicating).
    """
    if message_time is None:
        return math.nan, math.nan, math.nan
    f, b, o = profile.forward_s, profile.backward_s, profile.optimizer_s
    if schedule == "priority" and averages == "gradients":
        from hpcbench.train.synchronisation.priority import predict_priority_step

        cost = [message_time(int(nb)) for nb in bucket_bytes]
        return predict_priority_step(profile, np.asarray(bucket_bytes) / 4, bucket_ready_s, bucket_need_s, cost)
    if averages == "models":
        comm = message_time(int(np.sum(bucket_bytes)))
        step = profile.copy_s + max(f + b, comm) + mix_s + o
        return step, (f + b + o) / step, comm     # as the report's ideal: the profile's compute alone
    comm = comm_end = 0.0
    for nbytes, r in zip(bucket_bytes, bucket_ready_s):
        t = message_time(int(nbytes))
        comm_end, comm = max(f + r, comm_end) + t, comm + t
    step = max(f + b, comm_end) + o
    return step, (f + b + o) / step, comm

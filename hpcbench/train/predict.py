"""Alpha-beta prediction of a data-parallel step, with bucket overlap.

Each bucket ``i`` becomes ready at ``f + r_i`` (forward time ``f`` plus its
ready time in backward) and its allreduce takes ``T_i`` seconds by the
algorithm's cost model (:func:`hpcbench.collectives.cost.predict_allreduce`,
Thakur, Rabenseifner and Gropp 2005). A rank's outgoing link serialises its
messages (the link model's semantics), so buckets are reduced one after the
other: ``start_i = max(f + r_i, end_{i-1})``, ``end_i = start_i + T_i``. The
optimizer runs once backward and the last bucket are done:

    step = max(f + b, end_last) + o,    efficiency = (f + b + o) / step

(``b`` backward, ``o`` optimizer time). Model averaging starts at the step's
start with the whole model: ``step = max(f + b, T_model) + o``.

Under ``schedule: priority`` the step is that of
:func:`hpcbench.train.priority.predict_priority_step` instead.

Serialising whole buckets is exact for algorithms that keep every rank's
outgoing link busy through the operation (ring, Rabenseifner). It is
pessimistic for those that leave links idle in some phases (``star``,
``tree``: the root's results go out while the leaves already send the next
bucket), whose consecutive buckets overlap in a real run: measured there,
efficiency can beat the prediction.
"""

from __future__ import annotations

import math

import numpy as np

from hpcbench.collectives.cost import predict_allreduce

__all__ = ["message_time", "predict_step"]


def message_time(cost_model: str, nbytes: int, p: int, alpha_s: float, beta_s_per_byte: float) -> float:
    """Predicted seconds of one synchronisation of ``nbytes`` per rank on ``p`` ranks.

    ``cost_model`` is an allreduce algorithm (or ``"auto"``), or ``"pair"``
    (one exchange with one peer: ``alpha + nbytes beta``, 0 when ``p == 1``).
    """
    if p == 1 or nbytes == 0:
        return 0.0
    if cost_model == "pair":
        return alpha_s + nbytes * beta_s_per_byte
    return predict_allreduce(cost_model, int(nbytes), p, alpha_s, beta_s_per_byte)


def predict_step(profile, bucket_bytes, bucket_ready_s, cost_model: str | None, p: int, alpha_s: float,
                 beta_s_per_byte: float, averages: str = "gradients", schedule: str = "fifo",
                 bucket_need_s=None) -> tuple[float, float, float]:
    """Predicted step time, efficiency (compute / step) and communication time per step.

    Parameters
    ----------
    profile : hpcbench.train.profile.ComputeProfile
    bucket_bytes, bucket_ready_s : array_like, shape (n_buckets,)
        Bucket sizes in bytes, and when each is ready from the start of backward (seconds).
    cost_model : str or None
        See :func:`message_time`; None gives ``(nan, nan)``.
    p : int
        Workers.
    alpha_s, beta_s_per_byte : float
        Link latency (s) and inverse bandwidth (s/B); NaN gives ``(nan, nan)``.
    averages : {"gradients", "models"}
    schedule : {"fifo", "priority"}
        ``"priority"``: :func:`hpcbench.train.priority.predict_priority_step`
        (gradients only), which needs ``bucket_need_s``.
    bucket_need_s : array_like, shape (n_buckets,), optional
        When the next forward first needs each bucket (seconds from its start).

    Returns
    -------
    (float, float, float)
        Step seconds, efficiency in [0, 1], and the seconds of all the step's
        reductions one after the other (what a step without overlap spends
        communicating).
    """
    if cost_model is None or not (math.isfinite(alpha_s) and math.isfinite(beta_s_per_byte)):
        return math.nan, math.nan, math.nan
    f, b, o = profile.forward_s, profile.backward_s, profile.optimizer_s
    if schedule == "priority" and averages == "gradients":
        from hpcbench.train.priority import predict_priority_step

        cost = [message_time(cost_model, int(nb), p, alpha_s, beta_s_per_byte) for nb in bucket_bytes]
        return predict_priority_step(profile, np.asarray(bucket_bytes) / 4, bucket_ready_s, bucket_need_s, cost)
    if averages == "models":
        comm = comm_end = message_time(cost_model, int(np.sum(bucket_bytes)), p, alpha_s, beta_s_per_byte)
    else:
        comm = comm_end = 0.0
        for nbytes, r in zip(bucket_bytes, bucket_ready_s):
            t = message_time(cost_model, int(nbytes), p, alpha_s, beta_s_per_byte)
            comm_end, comm = max(f + r, comm_end) + t, comm + t
    step = max(f + b, comm_end) + o
    return step, (f + b + o) / step, comm

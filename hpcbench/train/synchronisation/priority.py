"""Priority scheduling of gradient buckets across the iteration barrier (``schedule: priority``).

With the default FIFO schedule a step ends when the last bucket is reduced,
and the optimizer updates every parameter before the next forward starts.
The first layers' gradients come last out of backward, so their reduction
ends the step, although the next forward needs those layers first.
ByteScheduler (Peng et al., SOSP 2019) and P3 (Jayarajan et al., MLSys 2019)
remove that barrier:

- each parameter is updated just before the next forward first uses it (the
  update of a bucket's parameters runs in a forward pre-hook, after the
  bucket's allreduce completes), so the next forward starts as soon as the
  first layers' bucket is reduced;
- buckets go on the wire by priority: the bucket the next forward needs
  earliest first, one at a time, so the front layers' small buckets do not
  queue behind the back layers' large ones.

:func:`priority_order` fixes the start order for a step from the profiled
timeline and the synchroniser's cost model (every rank computes the same
order from the same profile; see :mod:`hpcbench.collectives.ordered`), and
:func:`predict_priority_step` is the alpha-beta prediction of the resulting
steady-state step.
"""

from __future__ import annotations

import numpy as np

__all__ = ["bucket_need_times", "priority_order", "forward_with_waits", "predict_priority_step"]


def bucket_need_times(plan, param_need_s) -> np.ndarray:
    """When the next forward first needs each bucket: the earliest need of its parameters (seconds).

    Parameters
    ----------
    plan : hpcbench.train.synchronisation.buckets.BucketPlan
    param_need_s : array_like, shape (n_params,)
        From :meth:`hpcbench.train.steps.profile.ComputeProfile.need_times`.

    Returns
    -------
    numpy.ndarray of float64, shape (n_buckets,)
    """
    need = np.asarray(param_need_s, dtype=np.float64)
    return np.array([need[b].min() for b in plan.buckets], dtype=np.float64)


def priority_order(ready_s, cost_s, need_s) -> np.ndarray:
    """Start order of a step's buckets: whenever the link frees, the ready bucket needed earliest.

    A discrete-event simulation of one backward: bucket ``i`` is ready at
    ``ready_s[i]`` and occupies the link for ``cost_s[i]``; when the link is
    free at time ``L``, the next bucket is, among those ready by ``L`` (or,
    if none is, the first to become ready), the one with the smallest
    ``need_s`` (ties: the lower index).

    Parameters
    ----------
    ready_s, cost_s, need_s : array_like, shape (n,)
        Seconds: ready time from the start of backward, predicted allreduce
        time, and when the next forward first needs the bucket.

    Returns
    -------
    numpy.ndarray of int64, shape (n,)
        A permutation of ``range(n)``.

    Examples
    --------
    Three buckets ready at 0, 1 and 2 s, the last one needed first. Each
    taking 1.5 s on the wire, the link frees at 1.5 with only bucket 1
    ready; with bucket 0 taking 2.5 s, both others are ready when it frees
    and bucket 2 goes first:

    >>> priority_order([0, 1, 2], [1.5, 1.5, 1.5], [2, 1, 0]).tolist()
    [0, 1, 2]
    >>> priority_order([0, 1, 2], [2.5, 1, 1], [2, 1, 0]).tolist()
    [0, 2, 1]
    """
    ready = np.asarray(ready_s, dtype=np.float64)
    cost = np.asarray(cost_s, dtype=np.float64)
    need = np.asarray(need_s, dtype=np.float64)
    n = len(ready)
    if not (len(cost) == n and len(need) == n):
        raise ValueError(f"ready_s, cost_s, need_s: lengths {n}, {len(cost)}, {len(need)} differ")
    left = list(range(n))
    order = []
    link = -np.inf
    while left:
        avail = [i for i in left if ready[i] <= link]
        if not avail:
            link = min(ready[i] for i in left)
            avail = [i for i in left if ready[i] <= link]
        i = min(avail, key=lambda j: (need[j], j))
        order.append(i)
        left.remove(i)
        link = max(link, ready[i]) + cost[i]
    return np.array(order, dtype=np.int64)


def forward_with_waits(start: float, done_at, need_s, update_s, forward_s: float) -> float:
    """End of a forward that waits, before each bucket's first use, for its reduction and update.

    Parameters
    ----------
    start : float
        When the forward starts (seconds).
    done_at, need_s, update_s : array_like, shape (n,)
        When each bucket's allreduce completes (same clock as ``start``), when
        the forward first needs it (from the forward's start, without waits),
        and how long its parameters' optimizer update takes.
    forward_s : float
        The forward's compute time.

    Returns
    -------
    float
        When the forward ends: compute, plus waits, plus the updates.
    """
    done_at, need_s, update_s = (np.asarray(a, dtype=np.float64) for a in (done_at, need_s, update_s))
    t, computed = start, 0.0
    for j in np.argsort(need_s, kind="stable"):
        t = max(t + max(need_s[j] - computed, 0.0), done_at[j]) + update_s[j]
        computed = max(computed, need_s[j])
    return t + max(forward_s - computed, 0.0)


def predict_priority_step(profile, bucket_numel, ready_s, need_s, cost_s) -> tuple[float, float, float]:
    """Steady-state step time and efficiency of ``schedule: priority`` under the alpha-beta model.

    Backward starts at 0 and releases bucket ``i`` at ``ready_s[i]``; the
    buckets are reduced one at a time in :func:`priority_order`; the next
    forward starts when backward ends (``b``) and waits, before each bucket's
    first use, for its reduction and its share of the optimizer time
    (proportional to its elements) (:func:`forward_with_waits`); the next
    backward starts when that forward ends. Every bucket is done before the
    next forward ends, so steps do not overlap each other's communication and
    one step is the steady state:

        step = forward_end - b + b,    efficiency = (f + b + o) / step

    Parameters
    ----------
    profile : hpcbench.train.steps.profile.ComputeProfile
    bucket_numel, ready_s, need_s, cost_s : array_like, shape (n_buckets,)
        Elements, ready time from the start of backward, first need from the
        start of forward, and predicted allreduce seconds of each bucket.

    Returns
    -------
    (float, float, float)
        Step seconds, efficiency, and the seconds of all reductions one after the other.
    """
    f, b, o = profile.forward_s, profile.backward_s, profile.optimizer_s
    numel = np.asarray(bucket_numel, dtype=np.float64)
    ready, cost = np.asarray(ready_s, dtype=np.float64), np.asarray(cost_s, dtype=np.float64)
    done = np.zeros(len(cost))
    link = 0.0
    for i in priority_order(ready, cost, need_s):
        link = max(link, ready[i]) + cost[i]
        done[i] = link
    update = o * numel / numel.sum() if numel.sum() > 0 else np.zeros(len(numel))
    forward_end = forward_with_waits(b, done, need_s, update, f)
    step = forward_end     # from this backward's start to the next backward's start
    return step, (f + b + o) / step, float(cost.sum())

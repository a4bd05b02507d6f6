"""``client_updates: summed``: an executor trains its clients a few at a time and keeps only their weighted sum.

In ``rows`` mode (the default) an executor writes every client's update
into its result block and sends them all; the aggregator holds a round's
updates, ``m x P`` float32, and sums them in client id order. With
``summed`` an executor trains its tasks in groups of at most
:func:`group_rows` clients into a small block, adds each group's updates,
weighted, to one float64 sum in task order, and sends that sum with the
tasks' metadata rows: ``P x 8`` bytes per executor instead of ``n x P x 4``.
pfl aggregates the same way (each worker process sums its users'
statistics before they are all-reduced), as does TensorFlow Federated's
``tff.federated_sum`` inside a worker. No MPI here.

The aggregator adds the executors' sums in executor order (the executors'
runs list the clients in ascending id order, :func:`hpcbench.fl.executors.pool.assign_clients`)
and divides by the total weight: the weighted mean of ``rows`` mode, with the
additions grouped per executor. So the bits depend on which executor trained
which client (the world size and ``executor_concurrency``), and agree with
``rows`` mode within float64 rounding before the mean is rounded to float32.
"""

from __future__ import annotations

import numpy as np

from hpcbench.fl.aggregation.fedavg import accumulate_weighted, example_weights
from hpcbench.fl.executors.block import ResultBlock

__all__ = ["GROUP_BYTES", "group_rows", "train_summed"]

#: bytes of client updates an executor holds at once while summing (a group of float32 rows)
GROUP_BYTES = 64 << 20


def group_rows(num_params: int, tasks: int) -> int:
    """Clients trained together before their updates are added: ``GROUP_BYTES`` of float32 rows, at least 1.

    Parameters
    ----------
    num_params : int
        P, the length of an update.
    tasks : int
        The executor's tasks in the step (the group is no bigger).
    """
    return max(1, min(tasks, GROUP_BYTES // (4 * max(1, num_params))))


def train_summed(engine, tasks, meta: np.ndarray, total: np.ndarray, weighting: str,
                 work: ResultBlock) -> None:
    """Train ``tasks`` with ``engine`` group by group; write their metadata rows and their weighted sum.

    Parameters
    ----------
    engine : hpcbench.fl.engines.ClientEngine
    tasks : hpcbench.fl.engines.base.ClientTasks
        ``n`` tasks.
    meta : ndarray of shape (n, META), float64
        Filled with the tasks' metadata rows, in task order (what ``rows`` mode sends).
    total : ndarray of shape (P,), float64
        Overwritten with ``sum_k w_k * delta_k`` over the tasks in order, ``w_k`` the client's
        example count (``weighting: examples``) or 1 (``uniform``).
    weighting : str
        ``examples`` or ``uniform``.
    work : ResultBlock
        Rows the groups are trained into (at least one); ``len(work)`` clients train together.

    Raises
    ------
    ValueError
        If ``meta`` does not have one row per task, ``work`` has no row, or ``weighting`` is unknown.
    """
    example_weights(np.zeros(0), weighting)  # refuses an unknown weighting before any training
    n, g = len(tasks), len(work)
    if len(meta) != n or g < 1:
        raise ValueError(f"meta has {len(meta)} rows for {n} tasks; work has {g} rows (at least 1)")
    total[:] = 0.0
    for lo in range(0, n, g):
        hi = min(lo + g, n)
        rows = work.rows(0, hi - lo)
        engine.train(tasks.take(lo, hi), rows)
        meta[lo:hi] = rows.meta
        accumulate_weighted(total, rows.deltas, example_weights(rows.num_examples, weighting))

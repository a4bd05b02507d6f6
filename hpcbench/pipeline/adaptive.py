"""Run-time re-balancing (allocator ``adaptive``): re-solve from measured stage times, move layers.

Every ``every`` iterations the stages' measured compute time per micro-batch
``c_k`` gives each device's current slowdown ``s_{o_k} = c_k / T_k`` (``T_k``:
the profiled reference time of the stage's layers). The exact allocator
(:mod:`hpcbench.allocation.optimal`, given order) is solved on the instance
with those slowdowns; if its boundaries differ, the layers that change owner
move with their parameters, point to point from the old rank to the new one.
"""

from __future__ import annotations

import numpy as np

from hpcbench.allocation import allocate

__all__ = ["START", "estimate_slowdown", "rebalance", "move_layers"]

#: the registered allocator whose split ``adaptive`` starts from (and whose options its section takes)
START = "even"


def estimate_slowdown(inst, bounds: np.ndarray, order: np.ndarray, busy_s: np.ndarray) -> np.ndarray:
    """Slowdown of each device from each stage's busy time in one iteration, shape (D,).

    Parameters
    ----------
    inst : hpcbench.allocation.Instance
    bounds : numpy.ndarray of int, shape (D+1,)
    order : numpy.ndarray of int, shape (D,)
    busy_s : numpy.ndarray of float, shape (D,)
        Compute seconds of each stage in the iteration (``m`` forwards and backwards).
    """
    tsum = np.concatenate([[0.0], np.cumsum(inst.layer_time_s)])
    ref = (tsum[bounds[1:]] - tsum[bounds[:-1]]) * inst.micro_batches
    est = inst.slowdown.copy()
    est[order] = busy_s / np.maximum(ref, 1e-300)
    return est


def rebalance(inst, bounds, order, busy_s, schedule: str):
    """The optimal allocation for the measured slowdowns (same device order).

    Returns
    -------
    Allocation
        Its ``predicted_iteration_s`` is for the estimated slowdowns.
    """
    est = estimate_slowdown(inst, np.asarray(bounds), np.asarray(order), np.asarray(busy_s))
    new = allocate("optimal", inst.with_slowdown(est), schedule)
    new.order = np.asarray(order)
    return new


def move_layers(comm, layers: dict, old_bounds, new_bounds) -> dict:
    """Hand the layers whose stage changed to their new rank (collective over ``comm``).

    Parameters
    ----------
    layers : dict of int to torch.nn.Module
        This rank's layers by pipeline-layer index (old allocation).
    old_bounds, new_bounds : array_like of int, shape (D+1,)

    Returns
    -------
    dict of int to torch.nn.Module
        This rank's layers under the new allocation.
    """
    from hpcbench.runtime.wait import sleep_waitall

    rank = comm.rank
    old = np.asarray(old_bounds)
    new = np.asarray(new_bounds)

    def owner(bounds, j):
        return int(np.searchsorted(bounds, j, side="right") - 1)

    reqs, keep = [], {}
    for j in range(old[rank], old[rank + 1]):
        dst = owner(new, j)
        if dst == rank:
            keep[j] = layers[j]
        else:
            reqs.append(comm.isend(layers[j], dest=dst, tag=10_000 + j))
    for j in range(new[rank], new[rank + 1]):
        if j not in keep:
            keep[j] = comm.recv(source=owner(old, j), tag=10_000 + j)
    sleep_waitall(reqs)
    return keep

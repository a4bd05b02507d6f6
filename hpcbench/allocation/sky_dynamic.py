"""``sky-dynamic``: Sky Computing's greedy allocation (``Allocator.dynamic_allocate``).

Read from ``scaelum/dynamics/allocator.py`` (Zhu, Li and You, 2022). Starting
from the even split, in the given device order:

1. *memory pass* (``_allocate_by_mem``): for each stage ``j`` in turn, while
   it exceeds its cap and holds more than one layer, hand its last layer to
   stage ``j + 1``; then, while it is under its cap and stage ``j + 1`` holds
   more than one layer, take stage ``j + 1``'s first layer if the stage's
   memory with it stays strictly below the cap (Sky's ``<``). After every
   single move, stop if every stage fits (memory ``<=`` cap, Sky's
   ``_list_greater_than``), as Sky does; fail if a sweep changes nothing;
2. *workload pass* (``_allocate_by_flops_time``): with workload ``w_j =
   slowdown_j / min(slowdown) * sum(layer cost)`` and target ``mean(w)``,
   sweep ``j = 0 .. D-2``: a stage under target whose successor holds more
   than one layer takes one more layer if it fits its memory. Sweeps repeat
   until nothing moves or ``break_iter`` sweeps.

Differences from Sky's code, on purpose: the layer cost is the profiled
time, not FLOPs (Sky multiplies a device time by FLOPs; the product is the
same quantity up to a constant); the target is the plain mean (Sky floors
``sum // D``, which is 0 for costs in seconds); Sky's second branch (move a
boundary left when the *next* device is under target) compares the current
device's workload with itself, so it can never fire, and is left out: the
boundaries only move right, as they do in Sky's runs. Communication is not
considered (as in Sky).
"""

from __future__ import annotations

import numpy as np
from pydantic import Field, PositiveInt

from hpcbench.allocation.even import even_bounds
from hpcbench.allocation.instance import Allocation, InfeasibleError, Instance
from hpcbench.runtime.config import StrategyConfig

__all__ = ["allocate"]


def _by_memory(bounds: np.ndarray, mem: np.ndarray, cap: np.ndarray) -> np.ndarray:
    d = cap.size
    msum = np.concatenate([[0.0], np.cumsum(mem)])

    def used(j):
        return msum[bounds[j + 1]] - msum[bounds[j]]

    def fits():
        return all(used(j) <= cap[j] for j in range(d))

    while not fits():
        before = bounds.copy()
        for j in range(d - 1):
            while used(j) > cap[j] and bounds[j + 1] - bounds[j] > 1:
                bounds[j + 1] -= 1
                if fits():
                    return bounds
            while used(j) < cap[j] and bounds[j + 2] - bounds[j + 1] > 1:
                if not msum[bounds[j + 1] + 1] - msum[bounds[j]] < cap[j]:
                    break
                bounds[j + 1] += 1
                if fits():
                    return bounds
        if np.array_equal(before, bounds):
            used_all = [f"{used(j):.4g}" for j in range(d)]
            raise InfeasibleError(f"sky-dynamic: memory allocation failed: stage memory {used_all} B "
                                  f"against caps {[f'{c:.4g}' for c in cap]} B")
    return bounds


class Config(StrategyConfig):
    """Options of ``sky-dynamic`` (the keywords of :func:`allocate`)."""

    break_iter: PositiveInt = Field(1000, description="sweeps at most (Sky: 1000)")


def allocate(inst: Instance, break_iter: int = 1000) -> Allocation:
    """Sky Computing's dynamic (greedy) allocation in the given device order.

    Parameters
    ----------
    inst : Instance
    break_iter : int, default 1000
        Most workload sweeps (Sky's default).

    Raises
    ------
    InfeasibleError
        Fewer layers than devices, the smallest cap is not above the
        smallest layer's memory (Sky's assertion, strict as Sky's), or the
        memory pass cannot fit the caps.
    """
    inst.check_shape()
    d = inst.num_devices
    mem, cap = inst.layer_mem_bytes, inst.mem_cap_bytes
    if not cap.min() > mem.min():
        raise InfeasibleError(f"sky-dynamic: the smallest device cap ({cap.min():.4g} B) must exceed the "
                              f"smallest layer ({mem.min():.4g} B)")
    bounds = _by_memory(even_bounds(inst.num_layers, d), mem, cap)
    msum = np.concatenate([[0.0], np.cumsum(mem)])
    tsum = np.concatenate([[0.0], np.cumsum(inst.layer_time_s)])
    speed = inst.slowdown / inst.slowdown.min()
    for _ in range(break_iter):
        before = bounds.copy()
        target = float(np.mean(speed * (tsum[bounds[1:]] - tsum[bounds[:-1]])))
        for j in range(d - 1):
            work = speed[j] * (tsum[bounds[j + 1]] - tsum[bounds[j]])
            if work < target and bounds[j + 2] - bounds[j + 1] > 1:
                if msum[bounds[j + 1] + 1] - msum[bounds[j]] < cap[j]:
                    bounds[j + 1] += 1
        if np.array_equal(before, bounds):
            break
    return Allocation(np.arange(d), bounds, "sky-dynamic")

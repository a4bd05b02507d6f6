"""Layer allocation for pipeline stages: the problem, its cost model, and the allocators.

Every allocator is one file and one line of :data:`ALLOCATORS`
(:class:`~hpcbench.allocation.allocator.Allocator`: its function and its options' ``Config``); runners and
configs read the registry, and take an allocator's options as its own section. :func:`allocate` runs one by name, validates the
result against the instance (memory caps) and records its solve time,
bottleneck and predicted iteration time.
"""

from __future__ import annotations

import time

from hpcbench.allocation import even, optimal, sky_dynamic, sky_milp
from hpcbench.allocation.allocator import Allocator
from hpcbench.allocation.instance import Allocation, InfeasibleError, Instance
from hpcbench.allocation.schedules import SCHEDULES
from hpcbench.allocation.simulate import Timeline, simulate
from hpcbench.runtime.registry import Registry

__all__ = ["ALLOCATORS", "Allocator", "allocate", "Allocation", "Instance", "InfeasibleError", "SCHEDULES", "simulate",
           "Timeline"]

#: name -> :class:`Allocator` (``allocate(instance, **options) -> Allocation`` and its options' ``Config``)
ALLOCATORS: Registry[Allocator] = Registry("allocator", {
    "even": Allocator(even.allocate),
    "sky-dynamic": Allocator(sky_dynamic.allocate, sky_dynamic.Config),
    "sky-milp": Allocator(sky_milp.allocate, sky_milp.Config),
    "optimal": Allocator(optimal.allocate, optimal.Config),
})


def allocate(name: str, inst: Instance, schedule: str = "gpipe", **options) -> Allocation:
    """Run the allocator ``name`` on ``inst`` and fill in the allocation's figures.

    Parameters
    ----------
    name : str
        A key of :data:`ALLOCATORS`.
    inst : Instance
    schedule : str, default "gpipe"
        Schedule for the predicted iteration time (a key of ``SCHEDULES``).
    **options
        The allocator's own options (``order=``, ``time_limit_s=``...).

    Returns
    -------
    Allocation
        With ``solve_s``, ``bottleneck_s`` and ``predicted_iteration_s`` set.

    Raises
    ------
    hpcbench.runtime.registry.UnknownName
        Unknown allocator (the message lists the registered ones).
    InfeasibleError
        The allocation cannot fit the devices' memory caps.
    """
    method = ALLOCATORS[name]
    t0 = time.perf_counter()
    alloc = method(inst, **options)
    alloc.solve_s = time.perf_counter() - t0
    alloc.method = name
    inst.validate(alloc)
    alloc.bottleneck_s = inst.bottleneck_s(alloc)
    alloc.predicted_iteration_s = simulate(inst, alloc, schedule).iteration_s
    return alloc

"""``sky-milp``: Sky Computing's MILP (``Allocator.optimal_allocate``) through PuLP's bundled CBC.

Read from ``scaelum/dynamics/allocator.py``. Binary ``x[i, j]`` (layer ``j``
on device ``i``), continuous ``y[i]``, ``z[i]`` in ``[0, L]`` (last and first
layer of device ``i``), ``q`` (the objective):

1. ``sum_j mem_j x[i, j] <= cap_i``;
2. ``y[i] >= j x[i, j]``;
3. ``z[i] <= j x[i, j] + (L + 1)(1 - x[i, j])``;
4. ``y[i] - z[i] <= sum_j x[i, j] - 1`` (the layers of a device are contiguous);
5. ``sum_i x[i, j] = 1``;
6. ``q >= slowdown_i sum_j t_j x[i, j]``;

minimise ``q``, warm-started from the even split, solved with Sky's limits
(300 s, relative gap 0.2, so the answer is not proven optimal). The device
order is free: stages are ordered by their first layer afterwards.

Differences from Sky's code, on purpose: layer costs are profiled times
(Sky: device time x FLOPs, the same quantity up to a constant); every device
must hold at least one layer (``sum_j x[i, j] >= 1``), because in hpcbench
every rank is a pipeline stage (Sky's model lets a device stay empty);
``order="fixed"`` adds ``z[i+1] = y[i] + 1``, the same problem as
:mod:`~hpcbench.allocation.optimal` with ``order="given"`` minus the
communication term. Like Sky's, the model has no communication term.
"""

from __future__ import annotations

import numpy as np

from hpcbench.allocation.even import even_bounds
from hpcbench.allocation.instance import Allocation, InfeasibleError, Instance

__all__ = ["allocate", "SKY_TIME_LIMIT_S", "SKY_GAP_REL"]

#: Sky Computing's solver limits.
SKY_TIME_LIMIT_S = 300.0
SKY_GAP_REL = 0.2


def allocate(inst: Instance, order: str = "free", time_limit_s: float = SKY_TIME_LIMIT_S,
             gap_rel: float = SKY_GAP_REL, threads: int = 1, msg: bool = False) -> Allocation:
    """Solve Sky's MILP with CBC.

    Parameters
    ----------
    inst : Instance
    order : {"free", "fixed"}, default "free"
        Free device order (Sky), or the instance's given order.
    time_limit_s, gap_rel : float
        CBC limits (Sky: 300 s, 0.2).
    threads : int, default 1
        CBC threads (Sky: 24).
    msg : bool
        Print CBC's log.

    Raises
    ------
    InfeasibleError
        The solver proves the caps cannot be met, or finds no solution in time.
    """
    import pulp

    if order not in ("free", "fixed"):
        raise ValueError(f"order must be 'free' or 'fixed', got {order!r}")
    inst.check_shape()
    d, n = inst.num_devices, inst.num_layers
    t, mem, cap, slow = inst.layer_time_s, inst.layer_mem_bytes, inst.mem_cap_bytes, inst.slowdown
    scale = 1.0 / max(float(t.max()), 1e-300)   # seconds -> O(1) numbers for the solver's tolerances
    prob = pulp.LpProblem("sky_optimal_allocate", pulp.LpMinimize)
    x = pulp.LpVariable.matrix("x", (range(d), range(n)), cat=pulp.LpBinary)
    y = pulp.LpVariable.matrix("y", range(d), lowBound=0, upBound=n)
    z = pulp.LpVariable.matrix("z", range(d), lowBound=0, upBound=n)
    q = pulp.LpVariable("max_device_time")
    bounds = even_bounds(n, d)
    for i in range(d):
        z[i].setInitialValue(int(bounds[i]))
        y[i].setInitialValue(int(bounds[i + 1] - 1))
        for j in range(n):
            x[i][j].setInitialValue(1 if bounds[i] <= j < bounds[i + 1] else 0)
    prob += q, "max_device_time"  # objective (Sky assigns model.objective = q)
    for i in range(d):
        if np.isfinite(cap[i]):
            prob += pulp.LpAffineExpression([(x[i][j], float(mem[j])) for j in range(n)]) <= float(cap[i])
        for j in range(n):
            prob += y[i] >= j * x[i][j]
            prob += z[i] <= j * x[i][j] + (n + 1) * (1 - x[i][j])
        prob += y[i] - z[i] <= pulp.lpSum(x[i]) - 1
        prob += pulp.lpSum(x[i]) >= 1
        prob += q >= float(slow[i] * scale) * pulp.lpSum(float(t[j]) * x[i][j] for j in range(n))
    for j in range(n):
        prob += pulp.lpSum(x[i][j] for i in range(d)) == 1
    if order == "fixed":
        for i in range(d - 1):
            prob += z[i + 1] == y[i] + 1
    solver = pulp.PULP_CBC_CMD(timeLimit=time_limit_s, msg=msg, gapRel=gap_rel, threads=threads,
                               warmStart=True)
    prob.solve(solver)
    status = pulp.LpStatus[prob.status]
    solution = pulp.LpSolution.get(prob.sol_status, str(prob.sol_status))
    if status == "Infeasible" or prob.sol_status not in (pulp.LpSolutionOptimal, pulp.LpSolutionIntegerFeasible):
        raise InfeasibleError(f"sky-milp: CBC found no allocation within the memory caps "
                              f"(status {status!r}, {time_limit_s:g} s limit)")
    assign = np.array([[round(x[i][j].value() or 0.0) for j in range(n)] for i in range(d)])
    first = np.array([int(np.argmax(assign[i])) for i in range(d)])
    devs = np.argsort(first, kind="stable")
    sizes = assign.sum(axis=1)[devs]
    alloc = Allocation(devs, np.concatenate([[0], np.cumsum(sizes)]), "sky-milp",
                       info={"order_mode": order, "solver_status": solution,
                             "milp_objective_s": float(pulp.value(q)) / scale})
    return alloc

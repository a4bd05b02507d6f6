"""``sky-milp``: Sky Computing's MILP (``Allocator.optimal_allocate``), solved by CBC or HiGHS.

Read from ``scaelum/dynamics/allocator.py``. Binary ``x[i, j]`` (layer ``j``
on device ``i``), continuous ``y[i]``, ``z[i]`` in ``[0, L]`` (last and first
layer of device ``i``), free ``q`` (the objective):

1. ``sum_j mem_j x[i, j] <= cap_i``;
2. ``y[i] >= j x[i, j]``;
3. ``z[i] <= j x[i, j] + (L + 1)(1 - x[i, j])``;
4. ``y[i] - z[i] <= sum_j x[i, j] - 1`` (the layers of a device are contiguous);
5. ``sum_i x[i, j] = 1``;
6. ``q >= slowdown_i sum_j t_j x[i, j]``;

minimise ``q``, starting from the even split (Sky's feasible start), with
Sky's limits by default (300 s, relative gap 0.2: an answer within 20 % of
the bound counts as done). The device order is free: stages are ordered by
their first layer afterwards. ``order="fixed"`` adds ``z[i+1] = y[i] + 1``:
then the model is :mod:`~hpcbench.allocation.optimal`'s problem with
``order="given"`` minus the communication term, and solved to optimality
(``gap_rel=0``) its objective equals that allocator's bottleneck on the same
instance with free links.

Solvers (``solver=``, :data:`hpcbench.allocation.milp.SOLVERS`): ``"cbc"``
(COIN-OR CBC through PuLP, what Sky runs when Gurobi is not installed; Sky
asks for 24 threads, hpcbench defaults to 1) and ``"highs"`` (HiGHS through
``highspy``). Both get the even split as their MIP start, and the allocator
returns the better of the start and the solver's incumbent (the start
where the solver returns nothing). The allocation's ``info`` records what
the solve achieved:
``solver_status`` (``"optimal"``, ``"gap limit"``, ``"time limit"``, ``"no
solution"``), ``warm_start_returned`` (the answer is the even split itself),
``milp_objective_s`` and ``milp_bound_s`` (seconds, the objective of the
answer and the solver's proven lower bound), ``milp_gap`` (relative) and
``milp_nodes`` (branch-and-bound nodes explored).

Differences from Sky's code, on purpose: layer costs are profiled times
(Sky: device time x FLOPs, the same quantity up to a constant); every device
must hold at least one layer (``sum_j x[i, j] >= 1``), because in hpcbench
every rank is a pipeline stage (Sky's model lets a device stay empty); the
objective is scaled to ``O(1)`` numbers (times divided by the largest layer
time) for the solvers' tolerances. Like Sky's, the model has no
communication term.
"""

from __future__ import annotations

from typing import Literal

import numpy as np
import scipy.sparse
from pydantic import Field, PositiveInt, field_validator

from hpcbench.allocation.even import even_bounds
from hpcbench.allocation.instance import Allocation, InfeasibleError, Instance
from hpcbench.allocation.milp import SOLVERS, MilpProblem, solve
from hpcbench.allocation.milp.problem import relative_gap
from hpcbench.runtime.config import StrategyConfig

__all__ = ["allocate", "formulate", "SKY_TIME_LIMIT_S", "SKY_GAP_REL"]

#: Sky Computing's solver limits.
SKY_TIME_LIMIT_S = 300.0
SKY_GAP_REL = 0.2

_WORSE = 1e-9   # relative margin by which a solver's incumbent must beat the start to replace it


def formulate(inst: Instance, order: str = "free") -> tuple[MilpProblem, float]:
    """Sky's MILP for ``inst`` in matrix form, with the even split as its start.

    Variables, in this order: ``x`` (``D x L``, row-major: ``x[i, j]`` at
    ``i L + j``), ``y`` (``D``), ``z`` (``D``), ``q``.

    Parameters
    ----------
    inst : Instance
    order : {"free", "fixed"}

    Returns
    -------
    problem : MilpProblem
        ``start`` is the even split, or ``None`` where it breaks a memory cap.
    scale : float
        ``q`` is the bottleneck in seconds times ``scale`` (``1 / max(layer_time_s)``).
    """
    d, n = inst.num_devices, inst.num_layers
    t, mem, cap, slow = inst.layer_time_s, inst.layer_mem_bytes, inst.mem_cap_bytes, inst.slowdown
    scale = 1.0 / max(float(t.max()), 1e-300)
    nx = d * n
    iy, iz, iq = nx, nx + d, nx + 2 * d
    xi = np.arange(nx).reshape(d, n)
    jj = np.broadcast_to(np.arange(n, dtype=np.float64), (d, n))
    dev = np.broadcast_to(np.arange(d)[:, None], (d, n))
    rows, cols, vals, lbs, ubs = [], [], [], [], []
    nrows = 0

    def add(count, r, c, v, lb, ub):
        nonlocal nrows
        rows.append(np.asarray(r, dtype=np.int64).ravel() + nrows)
        cols.append(np.asarray(c, dtype=np.int64).ravel())
        vals.append(np.asarray(v, dtype=np.float64).ravel())
        lbs.append(np.broadcast_to(lb, count).astype(np.float64))
        ubs.append(np.broadcast_to(ub, count).astype(np.float64))
        nrows += count

    inf = np.inf
    capped = np.flatnonzero(np.isfinite(cap))                          # 1. memory
    add(capped.size, np.repeat(np.arange(capped.size), n), xi[capped], np.tile(mem, capped.size), -inf, cap[capped])
    pair = np.arange(nx)                                               # one row per (i, j)
    add(nx, np.stack([pair, pair], 1), np.stack([iy + dev.ravel(), xi.ravel()], 1),   # 2. y_i - j x_ij >= 0
        np.stack([np.ones(nx), -jj.ravel()], 1), 0.0, inf)
    add(nx, np.stack([pair, pair], 1), np.stack([iz + dev.ravel(), xi.ravel()], 1),   # 3. z_i + (L+1-j) x_ij <= L+1
        np.stack([np.ones(nx), n + 1 - jj.ravel()], 1), -inf, n + 1.0)
    i_rows = np.repeat(np.arange(d), n + 2)                            # 4. y_i - z_i - sum_j x_ij <= -1
    add(d, i_rows, np.concatenate([xi, (iy + np.arange(d))[:, None], (iz + np.arange(d))[:, None]], 1),
        np.concatenate([-np.ones((d, n)), np.ones((d, 1)), -np.ones((d, 1))], 1), -inf, -1.0)
    add(d, np.repeat(np.arange(d), n), xi, np.ones(nx), 1.0, inf)  # every device holds a layer
    add(n, np.tile(np.arange(n), d), xi, np.ones(nx), 1.0, 1.0)    # 5. every layer on one device
    add(d, np.repeat(np.arange(d), n + 1), np.concatenate([np.full((d, 1), iq), xi], 1),   # 6. q >= work_i
        np.concatenate([np.ones((d, 1)), -(slow * scale)[:, None] * t[None, :]], 1), 0.0, inf)
    if order == "fixed":                                               # z_{i+1} - y_i = 1
        k = np.arange(d - 1)
        add(d - 1, np.stack([k, k], 1), np.stack([iz + k + 1, iy + k], 1), np.tile([1.0, -1.0], (d - 1, 1)), 1.0, 1.0)
    a = scipy.sparse.csr_matrix((np.concatenate(vals), (np.concatenate(rows), np.concatenate(cols))),
                                shape=(nrows, iq + 1))
    col_lb = np.concatenate([np.zeros(nx + 2 * d), [-inf]])
    col_ub = np.concatenate([np.ones(nx), np.full(2 * d, float(n)), [inf]])
    integer = np.concatenate([np.ones(nx, bool), np.zeros(2 * d + 1, bool)])
    b = even_bounds(n, d)
    start = np.zeros(iq + 1)
    for i in range(d):
        start[xi[i, b[i]:b[i + 1]]] = 1.0
    start[iy:iz], start[iz:iq] = b[1:] - 1, b[:-1]
    start[iq] = float(np.max(slow * scale * np.add.reduceat(t, b[:-1])))
    c = np.zeros(iq + 1)
    c[iq] = 1.0
    problem = MilpProblem(c, a, np.concatenate(lbs), np.concatenate(ubs), col_lb, col_ub, integer, start)
    if not problem.is_feasible(start):
        problem = MilpProblem(c, a, problem.row_lb, problem.row_ub, col_lb, col_ub, integer, None)
    return problem, scale


def _decode(assign: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Device order and stage bounds of a ``D x L`` 0/1 assignment with contiguous rows."""
    first = assign.argmax(axis=1)
    devs = np.argsort(first, kind="stable")
    bounds = np.concatenate([[0], np.cumsum(assign.sum(axis=1)[devs])])
    rebuilt = np.zeros_like(assign)
    for k, dev in enumerate(devs):
        rebuilt[dev, bounds[k]:bounds[k + 1]] = 1
    if not np.array_equal(rebuilt, assign):
        raise RuntimeError("sky-milp: the solver's assignment is not a contiguous split (numerical trouble)")
    return devs, bounds


class Config(StrategyConfig):
    """Options of ``sky-milp`` (the keywords of :func:`allocate`)."""

    order: Literal["free", "fixed"] = Field("free", description="free device order (Sky) or the given one")
    solver: str = Field("cbc", description=(
        "MILP solver (allocation.milp.SOLVERS): cbc (PuLP's bundled CBC, Sky's fallback when Gurobi is absent) "
        "or highs"))
    time_limit_s: float = Field(SKY_TIME_LIMIT_S, gt=0.0, description="solver wall-clock limit, seconds (Sky: 300)")
    gap_rel: float = Field(SKY_GAP_REL, ge=0.0, description="relative gap at which the solver stops (Sky: 0.2; "
                                                            "0 solves to optimality)")
    threads: PositiveInt = Field(1, description="solver threads (Sky: 24 for CBC)")

    _solver = field_validator("solver")(SOLVERS.checker())


def allocate(inst: Instance, order: str = "free", solver: str = "cbc", time_limit_s: float = SKY_TIME_LIMIT_S,
             gap_rel: float = SKY_GAP_REL, threads: int = 1, msg: bool = False) -> Allocation:
    """Solve Sky's MILP.

    Parameters
    ----------
    inst : Instance
    order : {"free", "fixed"}, default "free"
        Free device order (Sky), or the instance's given order.
    solver : {"cbc", "highs"}, default "cbc"
        A key of :data:`hpcbench.allocation.milp.SOLVERS`.
    time_limit_s : float, default 300
        Solver wall-clock limit, seconds (Sky: 300).
    gap_rel : float, default 0.2
        Relative gap at which the solver stops (Sky: 0.2; 0 solves to optimality).
    threads : int, default 1
        Solver threads (Sky: 24 for CBC).
    msg : bool
        Print the solver's log.

    Returns
    -------
    Allocation
        ``info`` holds ``solver``, ``solver_status``, ``warm_start_returned``,
        ``milp_objective_s``, ``milp_bound_s``, ``milp_gap``, ``milp_nodes``
        and ``milp_wall_s`` (see the module docstring).

    Raises
    ------
    ValueError
        Unknown ``order`` or ``solver``, or ``threads`` the solver cannot use.
    InfeasibleError
        Fewer layers than devices, the solver proves the caps cannot be met,
        or it finds no solution in time and the even split breaks a cap.
    """
    if order not in ("free", "fixed"):
        raise ValueError(f"order must be 'free' or 'fixed', got {order!r}")
    if solver not in SOLVERS:
        raise ValueError(f"solver: unknown MILP solver {solver!r}; choose from {', '.join(SOLVERS)}")
    inst.check_shape()
    d, n = inst.num_devices, inst.num_layers
    problem, scale = formulate(inst, order)
    res = solve(solver, problem, time_limit_s, gap_rel=gap_rel, threads=threads, msg=msg)
    if res.status == "infeasible":
        raise InfeasibleError(f"sky-milp: {solver} proves that no allocation fits the memory caps")
    start = problem.start
    x, objective = res.x, res.objective
    if start is not None and (x is None or objective > start[-1] * (1 + _WORSE)):
        x, objective = start, float(start[-1])
    if x is None:
        raise InfeasibleError(f"sky-milp: {solver} found no allocation within the memory caps in "
                              f"{time_limit_s:g} s (status {res.status!r}) and the even split breaks a cap")
    assign = np.rint(x[:d * n]).astype(np.int64).reshape(d, n)
    devs, bounds = _decode(assign)
    returned_start = start is not None and np.array_equal(assign.ravel(), np.rint(start[:d * n]))
    return Allocation(devs, bounds, "sky-milp",
                      info={"order_mode": order, "solver": solver, "solver_status": res.status,
                            "warm_start_returned": bool(returned_start), "milp_objective_s": objective / scale,
                            "milp_bound_s": res.bound / scale, "milp_gap": relative_gap(objective, res.bound),
                            "milp_nodes": res.nodes, "milp_wall_s": res.wall_s})

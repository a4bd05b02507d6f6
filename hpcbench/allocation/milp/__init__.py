"""MILP solvers behind one interface: a :class:`MilpProblem` in, a :class:`MilpResult` out.

One file per solver and one line of :data:`SOLVERS`; :func:`solve` runs one
by name. Used by :mod:`hpcbench.allocation.sky_milp` (``solver=`` option).
"""

from __future__ import annotations

from typing import Callable

from hpcbench.allocation.milp import cbc, highs
from hpcbench.allocation.milp.problem import STATUSES, MilpProblem, MilpResult
from hpcbench.runtime.registry import Registry

__all__ = ["SOLVERS", "solve", "MilpProblem", "MilpResult", "STATUSES"]

#: name -> ``solve(problem, time_limit_s, gap_rel=0.0, threads=1, msg=False) -> MilpResult``
SOLVERS: Registry[Callable[..., MilpResult]] = Registry("MILP solver", {
    "cbc": cbc.solve,
    "highs": highs.solve,
})


def solve(name: str, problem: MilpProblem, time_limit_s: float, gap_rel: float = 0.0, threads: int = 1,
          msg: bool = False) -> MilpResult:
    """Solve ``problem`` with the solver ``name`` (a key of :data:`SOLVERS`).

    Raises
    ------
    ValueError
        Unknown solver, or an option the solver cannot honour.
    """
    if name not in SOLVERS:
        raise ValueError(f"solver: unknown MILP solver {name!r}; choose from {', '.join(SOLVERS)}")
    return SOLVERS[name](problem, time_limit_s, gap_rel=gap_rel, threads=threads, msg=msg)

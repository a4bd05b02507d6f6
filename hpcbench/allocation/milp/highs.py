"""``highs``: the HiGHS MILP solver through its own Python interface, ``highspy``.

HiGHS (Huangfu and Hall, "Parallelizing the dual revised simplex method",
Math. Prog. Comp. 2018; branch and cut with its own presolve, cuts and
primal heuristics) takes the matrix model as it is (``Highs.passModel``),
the start as a MIP start (``Highs.setSolution``, as CBC's ``-mips``), and the
limits as the options ``time_limit``, ``mip_rel_gap`` and ``threads``. Its
info reports the incumbent's objective, the dual bound, the relative gap and
the node count, also when a time limit stops it before any solution.

``highspy`` rather than ``scipy.optimize.milp`` (which runs the same HiGHS):
scipy passes no MIP start, and drops the bound and node count when HiGHS
stops without a solution, which is what happens at 160 layers x 64 devices.
"""

from __future__ import annotations

import math
import os
import sys
import time

import numpy as np

from hpcbench.allocation.milp.problem import MilpProblem, MilpResult, finished_status

__all__ = ["solve"]


def _new_highs(msg: bool):
    """A ``highspy.Highs``; without ``msg``, the banner HiGHS prints at its first construction is discarded."""
    import highspy

    if msg:
        return highspy.Highs()
    sys.stdout.flush()
    saved = os.dup(1)
    try:
        with open(os.devnull, "w") as null:
            os.dup2(null.fileno(), 1)
            return highspy.Highs()
    finally:
        os.dup2(saved, 1)
        os.close(saved)


def solve(problem: MilpProblem, time_limit_s: float, gap_rel: float = 0.0, threads: int = 1,
          msg: bool = False) -> MilpResult:
    """Solve ``problem`` with HiGHS.

    Parameters
    ----------
    problem : MilpProblem
        ``problem.start``, when given, is passed as HiGHS's MIP start.
    time_limit_s : float
        HiGHS ``time_limit`` (wall clock), seconds.
    gap_rel : float, default 0.0
        HiGHS ``mip_rel_gap``: stop once ``(incumbent - bound) / |incumbent| <= gap_rel``.
    threads : int, default 1
        HiGHS ``threads``.
    msg : bool, default False
        Print HiGHS's log.

    Returns
    -------
    MilpResult

    Raises
    ------
    RuntimeError
        HiGHS stopped for another reason than optimality, infeasibility or
        the time limit (a model error, an unbounded model).
    """
    import highspy

    h = _new_highs(msg)
    h.setOptionValue("output_flag", bool(msg))
    h.setOptionValue("time_limit", float(time_limit_s))
    h.setOptionValue("mip_rel_gap", float(gap_rel))
    h.setOptionValue("threads", int(threads))
    a = problem.A.tocsc()
    lp = highspy.HighsLp()
    lp.num_col_, lp.num_row_ = problem.num_vars, problem.num_rows
    lp.col_cost_ = problem.c
    lp.col_lower_, lp.col_upper_ = problem.col_lb, problem.col_ub
    lp.row_lower_, lp.row_upper_ = problem.row_lb, problem.row_ub
    lp.a_matrix_.format_ = highspy.MatrixFormat.kColwise
    lp.a_matrix_.start_, lp.a_matrix_.index_, lp.a_matrix_.value_ = a.indptr, a.indices, a.data
    lp.integrality_ = [highspy.HighsVarType.kInteger if i else highspy.HighsVarType.kContinuous
                       for i in problem.integer]
    h.passModel(lp)
    if problem.start is not None:
        start = highspy.HighsSolution()
        start.col_value = list(map(float, problem.start))
        start.value_valid = True
        h.setSolution(start)
    t0 = time.perf_counter()
    h.run()
    wall = time.perf_counter() - t0
    status = h.getModelStatus()
    info = h.getInfo()
    has_x = info.primal_solution_status == 2    # kSolutionStatusFeasible
    x = np.array(h.getSolution().col_value, dtype=np.float64) if has_x else None
    bound = float(info.mip_dual_bound)
    out = MilpResult("highs", "", x, float(problem.c @ x) if has_x else math.nan,
                     bound if math.isfinite(bound) else math.nan, int(info.mip_node_count), wall)
    kind = highspy.HighsModelStatus
    if status == kind.kInfeasible:
        out.status = "infeasible"
    elif status not in (kind.kOptimal, kind.kTimeLimit, kind.kInterrupt):
        raise RuntimeError(f"HiGHS: {h.modelStatusToString(status)}")
    elif x is None:
        out.status = "no solution"
    else:
        out.status = finished_status(out.gap) if status == kind.kOptimal else "time limit"
    return out

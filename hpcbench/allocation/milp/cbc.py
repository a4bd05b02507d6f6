"""``cbc``: COIN-OR CBC through PuLP's bundled binary (what Sky Computing uses without Gurobi).

The matrix model is handed to PuLP one row at a time (PuLP writes it as MPS
for the ``cbc`` executable), the start as CBC's MIP start (``-mips``, PuLP's
``warmStart=True``), and the limits as ``-sec``, ``-ratio`` and ``-threads``.
PuLP reports only the incumbent and a coarse status, so the objective, the
bound, the gap and the node count are read from CBC's own summary at the end
of its log (``Result - ...``, ``Objective value``, ``Lower bound``,
``Enumerated nodes``).
"""

from __future__ import annotations

import math
import re
import tempfile
import time
from pathlib import Path

import numpy as np

from hpcbench.allocation.milp.problem import MilpProblem, MilpResult, finished_status

__all__ = ["solve", "parse_log", "to_pulp", "PREPROCESS_WITH_START"]

#: CBC's ``-preprocess`` mode when a MIP start is given. CBC's default
#: (``sos``: SOS detection) with a MIP start makes the CBC 2.10.3 that PuLP
#: bundles report wrong figures on Sky's model: at 96 layers x 32 devices
#: (fixed order, 20 s) a lower bound of 4.000 where a feasible solution of
#: 3.884 exists, and the start's objective as 10.0 instead of 9.567 (both
#: scaled units). ``on`` (the same preprocessing without SOS detection)
#: gives a valid bound (3.514) and the start's true objective.
PREPROCESS_WITH_START = "on"

_FIELDS = {"objective": r"^Objective value:\s+(\S+)", "bound": r"^Lower bound:\s+(\S+)",
           "nodes": r"^Enumerated nodes:\s+(\d+)", "result": r"^Result - (.+)$",
           "progress_bound": r"best possible (\S+)"}


def parse_log(text: str) -> dict:
    """CBC's closing summary as ``{"result", "objective", "bound", "nodes"}`` (missing fields absent).

    ``result`` is the text after ``Result - `` (``"Optimal solution found"``,
    ``"Stopped on time limit"``, ``"Problem proven infeasible"``...). The
    summary prints the lower bound (only when the gap is not closed) to 4
    significant digits; the progress lines (``best possible ...``) print it
    to 8, so ``bound`` is the larger of the summary's and the last progress
    line's (both are valid bounds).
    """
    out: dict = {}
    for key, pattern in _FIELDS.items():
        found = re.findall(pattern, text, flags=re.MULTILINE)
        if not found:
            continue
        value = found[-1].strip()
        if key == "nodes":
            out[key] = int(value)
        elif key in ("objective", "bound", "progress_bound"):
            try:
                out[key] = float(value)
            except ValueError:
                pass
        else:
            out[key] = value
    progress = out.pop("progress_bound", None)
    if "bound" in out and progress is not None:
        out["bound"] = max(out["bound"], progress)
    return out


def _status(result: str, has_x: bool, gap: float) -> str:
    text = result.lower()
    if "infeasible" in text:
        return "infeasible"
    if not has_x:
        return "no solution"
    if "optimal" in text:
        return finished_status(gap)
    return "time limit"


def to_pulp(problem: MilpProblem):
    """``problem`` as a ``pulp.LpProblem`` and its variables in column order (the start set as initial values)."""
    import pulp

    n = problem.num_vars
    prob = pulp.LpProblem("milp", pulp.LpMinimize)
    vs = []
    for k in range(n):
        lb, ub = problem.col_lb[k], problem.col_ub[k]
        cat = pulp.LpInteger if problem.integer[k] else pulp.LpContinuous
        if problem.integer[k] and lb == 0 and ub == 1:
            cat = pulp.LpBinary
        vs.append(prob.add_variable(f"v{k}", None if np.isneginf(lb) else float(lb),
                                    None if np.isposinf(ub) else float(ub), cat))
        if problem.start is not None:
            vs[k].setInitialValue(float(problem.start[k]))
    prob += pulp.LpAffineExpression([(vs[k], float(problem.c[k])) for k in np.flatnonzero(problem.c)])
    a = problem.A.tocsr()
    for r in range(problem.num_rows):
        lo, hi = a.indptr[r], a.indptr[r + 1]
        expr = pulp.LpAffineExpression([(vs[k], float(v)) for k, v in zip(a.indices[lo:hi], a.data[lo:hi])])
        lb, ub = problem.row_lb[r], problem.row_ub[r]
        if lb == ub:
            prob += expr == float(lb)
            continue
        if np.isfinite(lb):
            prob += expr >= float(lb)
        if np.isfinite(ub):
            prob += expr <= float(ub)
    return prob, vs


def solve(problem: MilpProblem, time_limit_s: float, gap_rel: float = 0.0, threads: int = 1,
          msg: bool = False) -> MilpResult:
    """Solve ``problem`` with CBC.

    Parameters
    ----------
    problem : MilpProblem
        ``problem.start``, when given, is passed as CBC's MIP start.
    time_limit_s : float
        Wall-clock limit (CBC ``-sec``, PuLP's ``timeMode="elapsed"``), seconds.
    gap_rel : float, default 0.0
        Stop once ``(incumbent - bound) / |incumbent| <= gap_rel`` (CBC ``-ratio``).
    threads : int, default 1
        CBC threads.
    msg : bool, default False
        Print CBC's log after the solve.

    Returns
    -------
    MilpResult

    Raises
    ------
    pulp.PulpSolverError
        The CBC executable failed.
    """
    import pulp

    prob, vs = to_pulp(problem)
    with tempfile.TemporaryDirectory(prefix="hpcbench-cbc-") as tmp:
        log_path = Path(tmp) / "cbc.log"
        warm = problem.start is not None
        solver = pulp.PULP_CBC_CMD(timeLimit=time_limit_s, gapRel=gap_rel, threads=threads, msg=False,
                                   warmStart=warm, logPath=str(log_path),
                                   options=[f"preprocess {PREPROCESS_WITH_START}"] if warm else [])
        t0 = time.perf_counter()
        prob.solve(solver)
        wall = time.perf_counter() - t0
        log = log_path.read_text(errors="replace")
    if msg:
        print(log)
    summary = parse_log(log)
    has_x = prob.sol_status in (pulp.LpSolutionOptimal, pulp.LpSolutionIntegerFeasible)
    x = np.array([v.value() or 0.0 for v in vs]) if has_x else None
    objective = float(problem.c @ x) if x is not None else math.nan
    bound = summary.get("bound", math.nan)
    if summary.get("result", "").lower().startswith("optimal") and "bound" not in summary:
        bound = objective                        # CBC closed the gap (to its 1e-10 tolerance)
    res = MilpResult("cbc", "", x, objective, bound, summary.get("nodes", 0), wall)
    res.status = _status(summary.get("result", pulp.LpStatus[prob.status]), has_x, res.gap)
    return res

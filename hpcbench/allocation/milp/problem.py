"""A mixed-integer linear program in matrix form, and what a solver reports about it.

Every MILP solver of :mod:`hpcbench.allocation.milp` takes one
:class:`MilpProblem` and returns one :class:`MilpResult`, so a formulation
(Sky Computing's layer allocation in :mod:`hpcbench.allocation.sky_milp`) is
written once and solved by any of them.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import scipy.sparse

__all__ = ["MilpProblem", "MilpResult", "STATUSES", "OPTIMAL_GAP", "finished_status", "relative_gap"]

#: Relative gap at or below which a finished solve counts as ``"optimal"``
#: (above it, ``"gap limit"``: stopped by the caller's ``gap_rel``).
OPTIMAL_GAP = 1e-6

#: What :attr:`MilpResult.status` can be.
STATUSES = ("optimal", "gap limit", "time limit", "infeasible", "no solution")


@dataclasses.dataclass(frozen=True, eq=False)
class MilpProblem:
    """Minimise ``c @ v`` subject to ``row_lb <= A @ v <= row_ub``, ``col_lb <= v <= col_ub``, ``v[integer]`` integral.

    Parameters
    ----------
    c : numpy.ndarray of float64, shape (n,)
        Objective coefficients.
    A : scipy.sparse.csr_matrix of float64, shape (m, n)
        Constraint matrix.
    row_lb, row_ub : numpy.ndarray of float64, shape (m,)
        Row bounds (``-inf`` / ``inf`` for one-sided rows; equal for equalities).
    col_lb, col_ub : numpy.ndarray of float64, shape (n,)
        Variable bounds (``-inf`` / ``inf`` allowed).
    integer : numpy.ndarray of bool, shape (n,)
        Which variables are integral.
    start : numpy.ndarray of float64, shape (n,), optional
        A feasible solution to start from (a MIP start); ``None`` for none.
    """

    c: np.ndarray
    A: scipy.sparse.csr_matrix
    row_lb: np.ndarray
    row_ub: np.ndarray
    col_lb: np.ndarray
    col_ub: np.ndarray
    integer: np.ndarray
    start: np.ndarray | None = None

    def __post_init__(self) -> None:
        m, n = self.A.shape
        for name, size in (("c", n), ("row_lb", m), ("row_ub", m), ("col_lb", n), ("col_ub", n), ("integer", n)):
            if np.shape(getattr(self, name)) != (size,):
                raise ValueError(f"{name}: expected shape ({size},), got {np.shape(getattr(self, name))}")
        if self.start is not None and np.shape(self.start) != (n,):
            raise ValueError(f"start: expected shape ({n},), got {np.shape(self.start)}")

    @property
    def num_vars(self) -> int:
        """``n``."""
        return int(self.A.shape[1])

    @property
    def num_rows(self) -> int:
        """``m``."""
        return int(self.A.shape[0])

    def is_feasible(self, v: np.ndarray, tol: float = 1e-9) -> bool:
        """Whether ``v`` meets every row, bound and integrality, to an absolute tolerance ``tol``."""
        av = self.A @ v
        return bool(np.all(av >= self.row_lb - tol) and np.all(av <= self.row_ub + tol)
                    and np.all(v >= self.col_lb - tol) and np.all(v <= self.col_ub + tol)
                    and np.all(np.abs(v[self.integer] - np.round(v[self.integer])) <= tol))


@dataclasses.dataclass
class MilpResult:
    """What one MILP solve returned.

    Attributes
    ----------
    solver : str
        The solver's registry name (``"cbc"``, ``"highs"``).
    status : str
        One of :data:`STATUSES`: ``"optimal"`` (finished, relative gap at most
        :data:`OPTIMAL_GAP`), ``"gap limit"`` (finished because the gap fell
        under the caller's ``gap_rel``), ``"time limit"`` (stopped by the
        time limit holding a solution), ``"infeasible"`` (proved), ``"no
        solution"`` (stopped without one).
    x : numpy.ndarray of float64, shape (n,), or None
        The incumbent solution (``None`` without one).
    objective : float
        ``c @ x`` of the incumbent (NaN without one), in the problem's units.
    bound : float
        Best proven lower bound on the optimum (NaN if the solver gave none).
    nodes : int
        Branch-and-bound nodes explored (0: stopped at the root).
    wall_s : float
        Wall time of the solver call, seconds (model hand-over included).
    """

    solver: str
    status: str
    x: np.ndarray | None
    objective: float = math.nan
    bound: float = math.nan
    nodes: int = 0
    wall_s: float = 0.0

    @property
    def gap(self) -> float:
        """Relative gap of the incumbent, :func:`relative_gap` of ``objective`` and ``bound``."""
        return relative_gap(self.objective, self.bound)


def relative_gap(objective: float, bound: float) -> float:
    """``max(0, (objective - bound) / |objective|)``: 0 when both are 0, NaN if either is unknown."""
    if not (math.isfinite(objective) and math.isfinite(bound)):
        return math.nan
    if objective == 0.0:
        return 0.0 if bound >= 0.0 else math.inf
    return max(0.0, (objective - bound) / abs(objective))


def finished_status(gap: float) -> str:
    """``"optimal"`` or ``"gap limit"`` for a solve that stopped on its own, from its final relative gap."""
    return "optimal" if not gap > OPTIMAL_GAP else "gap limit"

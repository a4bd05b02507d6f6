"""Per-worker batch sizes that balance iteration times: StellaTrain's objective and two solvers.

StellaTrain (``backend/src/engine/batch_rate_alloc_optim.py``,
``MainOptimizer.target_func`` and ``target_sub_func_1/2``, lines 178-201)
minimises over integer batch sizes ``x`` (``x`` rounded first)::

    J(x) = penalty(x) / (sum_i x_i / t_slowest) + 5 * CV(t)

with ``t_i = x_i / f_i(x_i)`` each worker's modelled time, ``t_slowest`` the
largest, ``CV`` the coefficient of variation (population standard deviation
over mean) and ``penalty = 1 + 50 h(sum x, bandwidth)``, ``h`` a convergence
model learned offline by Bayesian optimisation (``skopt`` profiles shipped
per model). hpcbench has no such profile and drops the learned term
(``penalty = 1``): ``J`` is then the seconds per sample of the slowest
worker plus five times the spread of the times, and does not depend on the
bandwidth (with the penalty, StellaTrain's batch sizes also shrink when
bandwidth is scarce).

Solvers, one line each in :data:`BATCH_SOLVERS`:

``nelder-mead``  StellaTrain's: scipy's Nelder-Mead (``adaptive``) within the
                 bounds from several starts (32 random ones at the first
                 optimisation; later the previous answer and twice it),
                 keeping the best (lines 297-318).
``exact``        every balanced allocation, then a coordinate polish (below).

The balanced allocation of a time ``T`` gives each worker the largest batch
in its bounds whose time is at most ``T``; ``exact`` evaluates ``J`` at the
balanced allocation of every time any worker can take (all candidates,
exactly), keeps the best, then improves it one worker at a time (every
batch size of that worker, the others fixed) until no change lowers ``J``.
It is a search, not a proof of the global minimum over all ``prod(range)``
allocations; the tests check that it is never worse than ``nelder-mead``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Sequence

import numpy as np
from scipy.optimize import minimize

from hpcbench.controller.throughput import ThroughputModel
from hpcbench.runtime.errors import InputError
from hpcbench.runtime.registry import Registry

__all__ = ["BatchProblem", "BatchAllocation", "objective", "solve_batch_sizes", "BATCH_SOLVERS",
           "CV_WEIGHT"]

#: StellaTrain's weight of the coefficient of variation (``lambda_2 = 5``)
CV_WEIGHT = 5.0


@dataclass(frozen=True)
class BatchProblem:
    """Workers' throughput models and batch-size bounds.

    Attributes
    ----------
    alpha, beta : numpy.ndarray of float64, shape (n,)
        The workers' :class:`ThroughputModel` parameters.
    lower, upper : numpy.ndarray of int64, shape (n,)
        Inclusive bounds of each worker's batch size, ``1 <= lower <= upper``
        (StellaTrain: 1 and the GPU's largest batch).
    weight : float
        Weight of the coefficient of variation (5).
    """

    alpha: np.ndarray
    beta: np.ndarray
    lower: np.ndarray
    upper: np.ndarray
    weight: float = CV_WEIGHT

    @classmethod
    def of(cls, models: Sequence[ThroughputModel], lower, upper, weight: float = CV_WEIGHT) -> "BatchProblem":
        """From throughput models and bounds (scalars broadcast).

        Raises
        ------
        InputError
            Bounds not ``1 <= lower <= upper``, or no worker.
        """
        n = len(models)
        lo = np.broadcast_to(np.asarray(lower, dtype=np.int64), (n,)).copy()
        hi = np.broadcast_to(np.asarray(upper, dtype=np.int64), (n,)).copy()
        if n == 0 or np.any(lo < 1) or np.any(hi < lo):
            raise InputError(f"batch bounds must satisfy 1 <= lower <= upper for each of >= 1 workers, "
                             f"got lower {lo.tolist()}, upper {hi.tolist()}")
        return cls(np.array([m.alpha for m in models], dtype=np.float64),
                   np.array([m.beta for m in models], dtype=np.float64), lo, hi, float(weight))

    def times(self, x) -> np.ndarray:
        """Each worker's modelled time ``x / f(x) = max(alpha, x) / beta`` (x of shape (..., n))."""
        x = np.asarray(x, dtype=np.float64)
        return np.maximum(self.alpha, x) / self.beta


@dataclass(frozen=True)
class BatchAllocation:
    """A solver's answer.

    Attributes
    ----------
    batch : tuple of int
        Batch size per worker.
    objective : float
        ``J`` at ``batch``.
    solver : str
    evaluations : int
        Objective evaluations spent.
    """

    batch: tuple[int, ...]
    objective: float
    solver: str
    evaluations: int = field(default=0, compare=False)


def objective(problem: BatchProblem, x) -> np.ndarray | float:
    """``J(round(x))``: slowest worker's seconds per sample plus ``weight`` times the CV of the times.

    ``x`` of shape (n,) gives a float, (m, n) an array of m values. The
    slowest worker is the one with the largest ``t_i``; the CV uses the
    population standard deviation (``numpy.std``), as StellaTrain.
    """
    x = np.round(np.asarray(x, dtype=np.float64))
    t = problem.times(x)
    value = t.max(axis=-1) / x.sum(axis=-1) + problem.weight * t.std(axis=-1) / t.mean(axis=-1)
    return float(value) if np.ndim(value) == 0 else value


def _nelder_mead(problem: BatchProblem, rng: np.random.Generator, restarts: int = 32,
                 starts: Sequence[Sequence[float]] = ()) -> BatchAllocation:
    bounds = list(zip(problem.lower.tolist(), problem.upper.tolist()))
    inits = [np.clip(np.round(np.asarray(s, dtype=np.float64)), problem.lower, problem.upper) for s in starts]
    inits += [rng.integers(problem.lower, problem.upper + 1).astype(np.float64) for _ in range(restarts)]
    if not inits:
        raise InputError("nelder-mead needs at least one start (restarts >= 1 or starts)")
    best, evals = None, 0
    for x0 in inits:
        res = minimize(lambda x: objective(problem, x), x0, bounds=bounds, method="Nelder-Mead",
                       options={"adaptive": True})
        evals += res.nfev
        x = np.clip(np.round(res.x), problem.lower, problem.upper)
        value = objective(problem, x)
        if best is None or value < best[1]:
            best = (x, value)
    return BatchAllocation(tuple(int(v) for v in best[0]), best[1], "nelder-mead", evals)


def _exact(problem: BatchProblem, rng: np.random.Generator | None = None, restarts: int = 0,
           starts: Sequence[Sequence[float]] = ()) -> BatchAllocation:
    n = problem.alpha.shape[0]
    sizes = [np.arange(lo, hi + 1) for lo, hi in zip(problem.lower, problem.upper)]
    times = [np.maximum(problem.alpha[i], s) / problem.beta[i] for i, s in enumerate(sizes)]   # nondecreasing
    cands = np.unique(np.concatenate(times))
    feasible = cands >= max(t[0] for t in times)              # every worker has a batch that fast
    cands = cands[feasible]
    alloc = np.empty((cands.size, n))
    for i in range(n):
        alloc[:, i] = sizes[i][np.searchsorted(times[i], cands, side="right") - 1]
    values = objective(problem, alloc)
    evals = cands.size
    k = int(np.argmin(values))
    x, best = alloc[k].copy(), float(values[k])
    improved = True
    while improved:                                           # coordinate polish
        improved = False
        for i in range(n):
            trial = np.repeat(x[None, :], sizes[i].size, axis=0)
            trial[:, i] = sizes[i]
            v = objective(problem, trial)
            evals += sizes[i].size
            j = int(np.argmin(v))
            if v[j] < best:
                x, best, improved = trial[j].copy(), float(v[j]), True
    return BatchAllocation(tuple(int(v) for v in x), best, "exact", evals)


#: solver name -> ``solve(problem, rng, restarts, starts) -> BatchAllocation``
BATCH_SOLVERS: Registry[Callable[..., BatchAllocation]] = Registry("batch solver", {
    "nelder-mead": _nelder_mead,
    "exact": _exact,
})


def solve_batch_sizes(problem: BatchProblem, solver: str = "exact", seed: int = 0, restarts: int = 32,
                      starts: Sequence[Sequence[float]] = ()) -> BatchAllocation:
    """Integer batch sizes within the bounds minimising :func:`objective`.

    Parameters
    ----------
    problem : BatchProblem
    solver : str
        A key of :data:`BATCH_SOLVERS`.
    seed : int
        Seed of the random starts (``nelder-mead``).
    restarts : int
        Random starts (``nelder-mead``; StellaTrain 32 at the first
        optimisation, 0 later).
    starts : sequence of array_like
        Further starting points (``nelder-mead``; StellaTrain: the previous
        answer scaled by the bandwidth change, and twice that).

    Returns
    -------
    BatchAllocation

    Raises
    ------
    InputError
        Unknown solver (the message lists the registered ones), or no start.
    """
    return BATCH_SOLVERS[solver](problem, np.random.default_rng(seed), restarts, starts)

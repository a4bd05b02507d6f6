"""The controller's batch solvers on random instances: is ``exact`` ever worse than ``nelder-mead``?

Instances: 1-8 workers, ``alpha`` uniform in [16, 128), ``beta`` in [100, 1000),
lower bounds 1-7 and ranges up to 120 batch sizes, seeds 0..N-1;
Nelder-Mead with ``--restarts`` random starts (StellaTrain uses 32 at its
first optimisation). Prints how often ``exact`` is worse, better and equal.

    python scripts/batch_solver_compare.py [--instances 1500] [--restarts 8]
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from hpcbench.controller import BatchProblem, ThroughputModel, solve_batch_sizes


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--instances", type=int, default=1500)
    ap.add_argument("--restarts", type=int, default=8)
    a = ap.parse_args()
    worse, better, equal = [], 0, 0
    t0 = time.perf_counter()
    for seed in range(a.instances):
        rng = np.random.default_rng(seed)
        n = int(rng.integers(1, 9))
        alpha, beta = rng.uniform(16, 128, n), rng.uniform(100, 1000, n)
        lo = rng.integers(1, 8, n)
        hi = lo + rng.integers(0, 120, n)
        p = BatchProblem.of([ThroughputModel(x, y) for x, y in zip(alpha, beta)], lo, hi)
        e = solve_batch_sizes(p, "exact")
        m = solve_batch_sizes(p, "nelder-mead", seed=seed, restarts=a.restarts)
        if e.objective > m.objective + 1e-12:
            worse.append(seed)
        elif e.objective < m.objective - 1e-12:
            better += 1
        else:
            equal += 1
    print(f"{a.instances} instances, 1-8 workers, nelder-mead with {a.restarts} restarts: exact worse on "
          f"{len(worse)} {worse[:10]}, better on {better}, equal on {equal} ({time.perf_counter() - t0:.0f} s)")


if __name__ == "__main__":
    main()

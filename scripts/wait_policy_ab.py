"""A/B of the collectives' spin budget: the policy before (spin up to 2 ms) against the current one.

Run under MPI, e.g. ``mpiexec -n 2 python scripts/wait_policy_ab.py --sizes 1K,16K,64K``.
For each size, ``--rounds`` rounds alternate the two policies; within each,
blocks of ``--calls`` calls of MPI's ``Allreduce``, hpcbench's ring and
``auto`` allreduce and ring ``iallreduce().wait()``, each call after
:func:`hpcbench.runtime.timing.line_up` (sleeping barrier + ``MPI_Barrier``,
as the collectives benchmark). Prints, per size and policy, the p50 over all
calls of the slowest rank's time in microseconds, and the load average at
start and end.

``old`` is :meth:`SleepCost.spin_budget` as it was (the sleep-cost estimate
bounded to 50 us-2 ms, whatever the operation's size); ``new`` is the
module's current method.
"""

from __future__ import annotations

import argparse
import os
import time

import numpy as np


def main() -> None:
    from mpi4py import MPI

    import hpcbench.collectives as hc
    from hpcbench.bench.collectives.job import parse_size
    from hpcbench.collectives import waiting
    from hpcbench.runtime.timing import line_up

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--sizes", default="1K,16K,64K", help="comma list of message sizes (bytes, K, M)")
    p.add_argument("--rounds", type=int, default=5, help="rounds alternating the two policies")
    p.add_argument("--calls", type=int, default=20, help="timed calls per block")
    a = p.parse_args()
    comm = MPI.COMM_WORLD
    policies = {"old": lambda self, nbytes=0: min(max(self.value_s, 5e-5), 2e-3),
                "new": waiting.SleepCost.spin_budget}
    if comm.rank == 0:
        print(f"# ranks {comm.size}, load average at start {os.getloadavg()[0]:.2f}", flush=True)
    for nbytes in (parse_size(s) for s in a.sizes.split(",")):
        x = np.ones(nbytes // 4, np.float32)
        o = np.empty_like(x)
        calls = {"mpi": lambda: comm.Allreduce(x, o),
                 "ring": lambda: hc.allreduce(x, o, algorithm="ring", comm=comm),
                 "auto": lambda: hc.allreduce(x, o, algorithm="auto", comm=comm),
                 "ring_nb": lambda: hc.iallreduce(x, o, algorithm="ring", comm=comm).wait()}
        times: dict[tuple[str, str], list[float]] = {}
        try:
            for _ in range(a.rounds):
                for pname, budget in policies.items():
                    waiting.SleepCost.spin_budget = budget
                    for cname, call in calls.items():
                        mine = []
                        for _ in range(a.calls):
                            line_up(comm)
                            t0 = time.perf_counter()
                            call()
                            mine.append(time.perf_counter() - t0)
                        slowest = np.empty(len(mine))
                        comm.Allreduce(np.array(mine), slowest, op=MPI.MAX)
                        times.setdefault((pname, cname), []).extend(slowest)
        finally:
            waiting.SleepCost.spin_budget = policies["new"]
        if comm.rank == 0:
            for pname in policies:
                cells = "  ".join(f"{c} {np.median(times[(pname, c)]) * 1e6:9.1f}" for c in calls)
                print(f"{nbytes:8d} {pname}  {cells}", flush=True)
    if comm.rank == 0:
        print(f"# load average at end {os.getloadavg()[0]:.2f}", flush=True)


if __name__ == "__main__":
    main()

"""Best-case cost per call of small allreduces, back to back: MPI, a bare mpi4py ring, hpcbench's.

Run at 2 ranks, e.g. ``mpiexec -n 2 python scripts/allreduce_percall.py --sizes 1K,16K,64K``.
For each size, ``--rounds`` rounds run, in turn, blocks of ``--calls``
back-to-back calls (no barrier between calls) of: MPI's ``Allreduce``; a
ring of bare mpi4py ``Irecv``/``Isend`` and spinning ``Test`` (``raw``: the
floor of any ring driven from Python, two exchanges); hpcbench's ring and
``auto`` allreduce; and their ``iallreduce().wait()``. Prints rank 0's
smallest and median mean-per-call over the rounds, in microseconds (the
smallest is the path's cost when the scheduler left both ranks alone).
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

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--sizes", default="1K,16K,64K", help="comma list of message sizes (bytes, K, M)")
    p.add_argument("--rounds", type=int, default=11)
    p.add_argument("--calls", type=int, default=100)
    a = p.parse_args()
    c = MPI.COMM_WORLD
    if c.size != 2:
        raise SystemExit("allreduce_percall.py: run with mpiexec -n 2 (the raw ring is written for 2 ranks)")
    r, peer = c.rank, 1 - c.rank
    if r == 0:
        print(f"# load average at start {os.getloadavg()[0]:.2f}; min / median of per-call means (us)")
    for nbytes in (parse_size(s) for s in a.sizes.split(",")):
        n = nbytes // 4
        x, o, t = np.ones(n, np.float32), np.empty(n, np.float32), np.empty(n, np.float32)
        h = n // 2
        mine, theirs = ((0, h), (h, n)) if r == 0 else ((h, n), (0, h))

        def raw_ring():
            rq = c.Irecv(t[:mine[1] - mine[0]], peer, 5)
            sq = c.Isend(x[theirs[0]:theirs[1]], peer, 5)
            while not rq.Test():
                pass
            while not sq.Test():
                pass
            np.add(x[mine[0]:mine[1]], t[:mine[1] - mine[0]], out=o[mine[0]:mine[1]])
            rq = c.Irecv(o[theirs[0]:theirs[1]], peer, 5)
            sq = c.Isend(o[mine[0]:mine[1]], peer, 5)
            while not rq.Test():
                pass
            while not sq.Test():
                pass

        calls = {"mpi": lambda: c.Allreduce(x, o), "raw": raw_ring,
                 "ring": lambda: hc.allreduce(x, o, algorithm="ring", comm=c),
                 "auto": lambda: hc.allreduce(x, o, algorithm="auto", comm=c),
                 "ring_nb": lambda: hc.iallreduce(x, o, algorithm="ring", comm=c).wait(),
                 "auto_nb": lambda: hc.iallreduce(x, o, algorithm="auto", comm=c).wait()}
        per_call: dict[str, list[float]] = {k: [] for k in calls}
        for _ in range(a.rounds):
            for k, f in calls.items():
                c.Barrier()
                t0 = time.perf_counter()
                for _ in range(a.calls):
                    f()
                per_call[k].append((time.perf_counter() - t0) / a.calls * 1e6)
        if r == 0:
            print(f"{nbytes:8d} " + "  ".join(f"{k} {min(v):.1f}/{np.median(v):.1f}"
                                           for k, v in per_call.items()), flush=True)
    if r == 0:
        print(f"# load average at end {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()

"""Best-case cost per call of small allreduces, back to back: MPI, a bare mpi4py ring, hpcbench's.

Run at any number of ranks, e.g. ``mpiexec -n 4 python scripts/allreduce_percall.py --sizes 1K,8K``.
For each size, ``--rounds`` rounds run, in an order rotated from round to
round, blocks of ``--calls`` back-to-back calls (no barrier between calls)
of: MPI's ``Allreduce``; ``raw``, a ring of bare mpi4py persistent requests
(``Recv_init`` / ``Send_init``, each wait a loop of ``Test`` and
``sched_yield``; the same blocks, messages and ``np.add`` calls as
hpcbench's out-of-place ring): the floor of any ring driven from Python;
hpcbench's ring and ``auto`` allreduce; and their ``iallreduce().wait()``.
Prints rank 0's smallest and median mean-per-call over the rounds, in
microseconds (the smallest is the path's cost when the scheduler left every
rank alone), and each median over MPI's.
"""

from __future__ import annotations

import argparse
import os
import time

import numpy as np


def raw_ring(comm, x: np.ndarray, out: np.ndarray):
    """A ring allreduce (sum) of ``x`` into ``out`` on bare persistent requests; returns the
    function that runs it once. Reduce-scatter then allgather, block ``i`` of ``n`` ending
    reduced on rank ``i``; receives into ``out``; no plan, no schedule objects. The returned
    function's ``requests`` are the persistent requests, to ``Free`` once done."""
    from hpcbench.collectives._core import partition

    n, r = comm.size, comm.rank
    right, left = (r + 1) % n, (r - 1) % n
    b = partition(x.size, n)
    blk = [slice(b[i], b[i + 1]) for i in range(n)]
    steps = []
    for k in range(2 * (n - 1)):
        sb, rb = blk[(r - k - 1) % n], blk[(r - k - 2) % n]
        send = x[sb] if k == 0 else out[sb]
        rq, sq = comm.Recv_init(out[rb], left, 7), comm.Send_init(send, right, 7)
        steps.append((rq, sq, (out[rb], x[rb]) if k < n - 1 else None))
    yield_ = os.sched_yield

    def run():
        for rq, sq, add in steps:
            rq.Start()
            sq.Start()
            while not rq.Test():
                yield_()
            while not sq.Test():
                yield_()
            if add is not None:
                np.add(add[0], add[1], out=add[0])
    run.requests = [q for rq, sq, _ in steps for q in (rq, sq)]    # freed by the caller
    return run


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
    if c.rank == 0:
        print(f"# ranks {c.size}, load average at start {os.getloadavg()[0]:.2f}; "
              f"min / median of per-call means (us), median over mpi's")
    for nbytes in (parse_size(s) for s in a.sizes.split(",")):
        n = nbytes // 4
        x, o = np.ones(n, np.float32), np.empty(n, np.float32)
        calls = {"mpi": lambda: c.Allreduce(x, o), "raw": raw_ring(c, x, o),
                 "ring": lambda: hc.allreduce(x, o, algorithm="ring", comm=c),
                 "auto": lambda: hc.allreduce(x, o, algorithm="auto", comm=c),
                 "ring_nb": lambda: hc.iallreduce(x, o, algorithm="ring", comm=c).wait(),
                 "auto_nb": lambda: hc.iallreduce(x, o, algorithm="auto", comm=c).wait()}
        calls["raw"]()
        if not np.allclose(o, c.size):
            raise SystemExit(f"allreduce_percall.py: the raw ring's sum is wrong at {nbytes} bytes")
        per_call: dict[str, list[float]] = {k: [] for k in calls}
        names = list(calls)
        for rnd in range(a.rounds):
            for k in names[rnd % len(names):] + names[:rnd % len(names)]:
                f = calls[k]
                f()
                c.Barrier()
                t0 = time.perf_counter()
                for _ in range(a.calls):
                    f()
                per_call[k].append((time.perf_counter() - t0) / a.calls * 1e6)
        for q in calls["raw"].requests:
            q.Free()
        if c.rank == 0:
            mpi = float(np.median(per_call["mpi"]))
            print(f"{nbytes:8d} " + "  ".join(
                f"{k} {min(v):.1f}/{np.median(v):.1f} ({np.median(v) / mpi:.2f}x)"
                for k, v in per_call.items()), flush=True)
    if c.rank == 0:
        print(f"# load average at end {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()

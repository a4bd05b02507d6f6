"""hpcbench's allreduce against MPI's, size by size, from one interleaved run: the regression check.

Run, e.g., ``mpiexec -n 2 python scripts/collectives_vs_mpi.py --sizes 4M,16M,64M`` or
``--sizes 1K-1M`` (every power of two in between); ``--nonblocking`` times the
custom algorithms as ``iallreduce(...).wait()``. Each size runs ``--rounds``
rounds; each round times every implementation (MPI's ``Allreduce`` and the
``--algorithms``) once more, in an order rotated from round to round, with the
collective benchmark's own harness and iteration counts
(:func:`hpcbench.runtime.timing.iteration_times`,
:func:`hpcbench.bench.collectives.report.iters_for`), on float32 sum buffers.
Per implementation and size it prints the p50 over every timed call of
every round (the slowest rank's time per call), the busbw from the mean
(nccl-tests: ``2 (n-1)/n * bytes / time``), and for the custom algorithms
the ratio to MPI of each (``p50 x``: time over MPI's, below 1 is faster;
``busbw x``: busbw over MPI's, above 1 is faster). The load average is
printed at the start of every size.

``--osu`` adds two MPI columns beside the harness's: ``osu`` is a plain OSU-style
loop (``MPI_Barrier``, then the timed ``Allreduce``; ``--osu-iters`` calls, each
rank's median, averaged over ranks as OSU averages its latency), ``lineup``
the harness of earlier versions (sleeping barrier and ``MPI_Barrier`` before
every timed call, p50 of the slowest rank); ``harness / osu`` is the
benchmark's MPI p50 over the OSU loop's.

Exit status 1 when ``--check`` is given and a custom algorithm's busbw is
below ``--min-busbw-ratio`` times MPI's at any size of at least 4 MiB, or its
p50 above ``--max-p50-ratio`` times MPI's at any size below; this is a
benchmark, not a unit test: run it on a quiet node and read the printed load.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np

LARGE = 4 << 20


def _sizes(text: str) -> list[int]:
    from hpcbench.bench.collectives.job import parse_size

    if "-" in text:                             # a range: every power of two from lo to hi
        lo, hi = (parse_size(t) for t in text.split("-"))
        out = []
        while lo <= hi:
            out.append(lo)
            lo *= 2
        return out
    return [parse_size(t) for t in text.split(",")]


def _osu_loop(comm, fn, iters: int) -> float:
    """OSU-style latency: ``MPI_Barrier``, timed call; median per rank, mean over ranks (s)."""
    for _ in range(max(2, iters // 10)):
        fn()
    t = np.empty(iters)
    for i in range(iters):
        comm.Barrier()
        t0 = time.perf_counter()
        fn()
        t[i] = time.perf_counter() - t0
    return float(np.mean(comm.allgather(float(np.median(t)))))


def _lineup_each_call(comm, fn, iters: int, warmup: int) -> np.ndarray:
    """The harness of earlier versions: sleeping barrier and ``MPI_Barrier`` before every timed call."""
    from hpcbench.runtime.timing import line_up, max_over_ranks

    for _ in range(warmup):
        fn()
    t = np.empty(iters)
    for i in range(iters):
        line_up(comm)
        t0 = time.perf_counter()
        fn()
        t[i] = time.perf_counter() - t0
    return max_over_ranks(comm, t)


def main() -> int:
    from mpi4py import MPI

    from hpcbench.bench.collectives.backends import Custom, MPIBackend, make_buffers
    from hpcbench.bench.collectives.report import busbw_factor, iters_for
    from hpcbench.runtime.timing import iteration_times

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--sizes", default="4M,16M,64M",
                   help="comma list of sizes (bytes, K, M), or LO-HI for every power of two")
    p.add_argument("--algorithms", default="ring,auto", help="custom allreduce algorithms")
    p.add_argument("--rounds", type=int, default=3, help="interleaved rounds per size")
    p.add_argument("-n", "--iters", type=int, default=50,
                   help="timed calls per round at the smallest sizes (shrinking as the benchmark's)")
    p.add_argument("-w", "--warmup", type=int, default=5)
    p.add_argument("--nonblocking", action="store_true",
                   help="custom algorithms as iallreduce(...).wait()")
    p.add_argument("--osu", action="store_true",
                   help="also MPI in a plain OSU-style loop and in the old line-up-per-call harness")
    p.add_argument("--osu-iters", type=int, default=100)
    p.add_argument("--check", action="store_true", help="exit 1 when a ratio misses its bound")
    p.add_argument("--min-busbw-ratio", type=float, default=1.0,
                   help="--check: least busbw over MPI's at sizes >= 4 MiB (default 1)")
    p.add_argument("--max-p50-ratio", type=float, default=2.0,
                   help="--check: largest p50 over MPI's below 4 MiB (default 2)")
    a = p.parse_args()
    comm = MPI.COMM_WORLD
    n, rank = comm.size, comm.rank
    say = print if rank == 0 else (lambda *x, **k: None)
    algs = [s.strip() for s in a.algorithms.split(",") if s.strip()]
    impls = {"mpi": MPIBackend(), **{g: Custom(g, None, a.nonblocking) for g in algs}}
    fac = busbw_factor("allreduce", n)
    say(f"# allreduce float32 sum, ranks={n}, custom={'iallreduce().wait()' if a.nonblocking else 'blocking'}, "
        f"{a.rounds} interleaved rounds per size; p50 (us) and busbw (GB/s); x = ratio to mpi")
    cols = [f"{'size':>9} {'load':>5} {'mpi p50':>9} {'busbw':>6}"]
    if a.osu:
        cols.append(f"{'osu':>7} {'lineup':>8} {'harness/osu':>11}")
    for g in algs:
        cols.append(f"{g + ' p50':>11} {'busbw':>6} {'p50 x':>6} {'busbw x':>7}")
    say("  ".join(cols))
    bad = []
    for nbytes in _sizes(a.sizes):
        count = nbytes // 4
        iters, warm = iters_for(nbytes, a.iters, a.warmup)
        load = os.getloadavg()[0]
        times: dict[str, list[np.ndarray]] = {k: [] for k in impls}
        osu, lineup = [], []
        names = list(impls)
        for rnd in range(a.rounds):
            order = names[rnd % len(names):] + names[:rnd % len(names)]
            for k in order:
                b = make_buffers("allreduce", "float32", "sum", count, comm, False)
                fn = impls[k].runner("allreduce", b, comm)
                times[k].append(iteration_times(comm, fn, iters, warm))
                if k == "mpi" and a.osu:
                    osu.append(_osu_loop(comm, fn, a.osu_iters if nbytes <= (1 << 20) else iters))
                    lineup.append(_lineup_each_call(comm, fn, iters, warm))
        stats = {}
        for k, ts in times.items():
            t = np.concatenate(ts)
            stats[k] = (float(np.median(t)), nbytes / float(np.mean(t)) * fac / 1e9)
        m50, mbus = stats["mpi"]
        row = [f"{nbytes:>9} {load:>5.2f} {m50 * 1e6:>9.1f} {mbus:>6.3f}"]
        if a.osu:
            o = float(np.median(osu))
            row.append(f"{o * 1e6:>7.1f} {float(np.median(np.concatenate(lineup))) * 1e6:>8.1f} "
                       f"{m50 / o:>11.2f}")
        for g in algs:
            g50, gbus = stats[g]
            row.append(f"{g50 * 1e6:>11.1f} {gbus:>6.3f} {g50 / m50:>6.2f} {gbus / mbus:>7.2f}")
            if nbytes >= LARGE and gbus < a.min_busbw_ratio * mbus:
                bad.append(f"{g} at {nbytes} B: busbw {gbus / mbus:.2f}x MPI's")
            if nbytes < LARGE and g50 > a.max_p50_ratio * m50:
                bad.append(f"{g} at {nbytes} B: p50 {g50 / m50:.2f}x MPI's")
        say("  ".join(row), flush=True)
    say(f"# load average at end {os.getloadavg()[0]:.2f}")
    if a.check:
        for line in bad:
            say(f"# MISSED: {line}")
        say(f"# check: {'FAILED' if bad else 'OK'}")
        return 1 if bad else 0
    return 0


if __name__ == "__main__":
    sys.exit(main())

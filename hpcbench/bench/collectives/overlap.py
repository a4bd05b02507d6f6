"""Overlap benchmark: how much ``iallreduce`` time hides behind torch compute.

Run as ``mpiexec -n N python -m hpcbench.collectives.bench --overlap [--link RATE]``
(:func:`run_overlap` is called by :mod:`hpcbench.bench.collectives.job`).

Method
------
Per transport (``shm``: real MPI; ``link``: the link model of ``--link``) and
message size, ``nreq`` ring ``iallreduce`` calls (float32) are the
communication and ``k`` 256x256 ``torch.mm`` calls (one torch thread) the
compute, with ``k`` chosen so that compute alone lasts ``factor`` times
communication alone (default 2). Then ``reps`` repetitions each time, back to
back and in a rotating order (comm, compute, both / compute, both, comm /
both, comm, compute):

* ``t_comm``: start the requests, wait for them;
* ``t_compute``: the matmuls alone;
* ``t_both``: start the requests, run the matmuls, wait for the requests.

Every measurement starts with the ranks lined up and counts the slowest rank
(:mod:`hpcbench.runtime.timing`). Each repetition gives

``hidden_i = 1 - (t_both_i - t_compute_i) / t_comm_i``

(the share of that repetition's communication time that did not add to its
compute time), and the reported ``hidden`` is the median over repetitions,
with the quartiles beside it. Measuring the three times of one repetition
within a fraction of a second of each other, and rotating their order, keeps
load drifting on a shared node from favouring any of them; the median keeps
a repetition hit by a load spike from moving the result. ``hidden`` is not
clipped: below 0, overlapping cost more than communicating after computing.

``cpu_share`` says how much of a core the compute-only run got (its thread CPU
time over its wall time, median over repetitions, lowest over ranks): near 1 on
a node with a core per rank; well below 1 when other jobs took the cores, and
then the communication's CPU work (copies, reductions, progress thread) is
stretched by the same factor and cannot hide, which is what such a row shows.
The load average at the start and end is printed and stored with the results.
"""

from __future__ import annotations

import os

import numpy as np

__all__ = ["OVERLAP_COLUMNS", "hidden_shares", "rotation", "run_overlap"]

OVERLAP_COLUMNS = [
    ("transport", "str", "",
     "shm: real MPI (shared memory); link: link-model transport (--link)"),
    ("size", "int64", "B", "bytes per iallreduce"),
    ("requests", "int64", "1", "outstanding iallreduce requests"),
    ("reps", "int64", "1", "interleaved repetitions (comm, compute, both)"),
    ("t_comm", "float64", "us", "communication only (start all, wait all), median"),
    ("t_compute", "float64", "us", "compute only (matmuls), median"),
    ("t_overlap", "float64", "us", "compute with the requests outstanding, median"),
    ("hidden", "float64", "1",
     "median over repetitions of 1 - (t_both - t_compute) / t_comm; share of comm hidden "
     "(< 0: overlapping cost more than running one after the other)"),
    ("hidden_q1", "float64", "1", "first quartile of the per-repetition hidden shares"),
    ("hidden_q3", "float64", "1", "third quartile of the per-repetition hidden shares"),
    ("cpu_share", "float64", "1",
     "median over repetitions of the compute-only run's thread CPU time / wall time, "
     "lowest over ranks: below ~0.9 other load took the core, and the row measures that"),
]

_KINDS = ("comm", "compute", "both")


def rotation(rep: int) -> tuple[str, str, str]:
    """Order of the three measurements in repetition ``rep`` (cyclic rotations of
    comm, compute, both, so each kind takes each position equally often)."""
    s = rep % 3
    return _KINDS[s:] + _KINDS[:s]


def hidden_shares(t_comm, t_compute, t_both) -> np.ndarray:
    """Per-repetition hidden shares ``1 - (t_both - t_compute) / t_comm``.

    Parameters
    ----------
    t_comm, t_compute, t_both : array_like of float, shape (reps,)
        Times of the same repetitions (any unit, the same for all three).

    Returns
    -------
    numpy.ndarray, shape (reps,)
        NaN where ``t_comm <= 0``.
    """
    c = np.asarray(t_comm, dtype=np.float64)
    p = np.asarray(t_compute, dtype=np.float64)
    b = np.asarray(t_both, dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(c > 0, 1.0 - (b - p) / c, np.nan)


def run_overlap(args, comm, sizes: list[int], link, link_text: str, progress: str, rf) -> int:
    """``--overlap``: iallreduces outstanding during a matmul loop (collective).

    Always measured over the real MPI path (``shm``); with ``--link`` also over
    the link-model transport (``link``), where wire time is modelled as waiting
    (as a NIC would move the bytes) instead of CPU copies.

    Parameters
    ----------
    args : argparse.Namespace
        Parsed options of :class:`hpcbench.bench.collectives.job.CollectivesJob`
        (``redop``, ``overlap_reps``, ``overlap_factor``).
    comm : mpi4py.MPI.Comm
    sizes : list of int
        Bytes per ``iallreduce``, one table row per size and transport.
    link : LinkTransport or None
        The ``--link`` transport (rows ``link``).
    link_text, progress : str
        Descriptions of the link and of the progress mode for the header.
    rf : hpcbench.results.ResultsFile or None
        The open results file on rank 0 (table ``overlap``), None elsewhere.

    Returns
    -------
    int
        Exit status (0).
    """
    import torch

    import hpcbench.collectives as hc
    from hpcbench.results import Column
    from hpcbench.runtime.faults import fault_point
    from hpcbench.runtime.timing import max_over_ranks, min_over_ranks, timed

    rank = comm.rank
    say = print if rank == 0 else (lambda *a, **k: None)
    torch.set_num_threads(1)
    nreq, reps, factor = 4, args.overlap_reps, args.overlap_factor
    a = torch.randn(256, 256)
    b = torch.randn(256, 256)
    transports = [("shm", None)] + ([("link", link)] if link is not None else [])

    def compute(k):
        c = a
        for _ in range(k):
            c = torch.mm(a, b)
        return c

    def comm_round(bufs, outs, tr, work=0):
        kw = {"comm": comm} if tr is None else {"transport": tr}
        reqs = [hc.iallreduce(x, o, op=args.redop, algorithm="ring", name=f"ov{i}", **kw)
                for i, (x, o) in enumerate(zip(bufs, outs))]
        if work:
            compute(work)
        hc.Request.waitall(reqs)

    def local_time(fn, cpu: list | None = None) -> float:
        t = timed(comm, fn)
        if cpu is not None:
            cpu.append(t.cpu_s / t.wall_s if t.wall_s > 0 else float("nan"))
        return t.wall_s

    def slowest(ts) -> np.ndarray:
        return max_over_ranks(comm, ts) * 1e6

    def calibrate(t_comm_us: float) -> int:
        """Matmul count ``k`` for compute = factor x comm: from one matmul's time
        (median of 3 short runs, timed now: the load of a shared node drifts), then
        corrected from medians of 3 measurements, at most twice."""
        m = 10
        per_mm = float(np.median(slowest([local_time(lambda: compute(m)) / m
                                          for _ in range(3)])))
        k = comm.bcast(max(1, int(round(factor * t_comm_us / per_mm))), root=0)
        for _ in range(2):
            t_comp = float(np.median(slowest([local_time(lambda: compute(k))
                                              for _ in range(3)])))
            if 0.8 * factor * t_comm_us <= t_comp <= 1.25 * factor * t_comm_us:
                break
            k = comm.bcast(max(1, int(round(k * factor * t_comm_us / max(t_comp, 1.0)))),
                           root=0)
        return k

    table = None
    if rank == 0:
        table = rf.table("overlap", [Column(*c) for c in OVERLAP_COLUMNS],
                         "share of iallreduce time hidden behind compute")
    load0 = os.getloadavg()
    say(f"# overlap: {nreq} outstanding ring iallreduce (float32) during 256x256 matmuls "
        f"lasting {factor:g}x the comm time, {reps} interleaved repetitions, "
        f"progress={progress}, torch threads=1, ranks={comm.size}, link={link_text}")
    say("# hidden = median over repetitions of 1 - (t_both - t_compute) / t_comm; "
        "q1..q3: its quartiles")
    say("# shm: real MPI over shared memory; its copies are CPU work that competes with the "
        "matmuls for the same cores")
    if link is not None:
        say("# link: link-model transport; wire time is waiting (a NIC's work), only "
            "reductions and local copies cost CPU")
    say(f"# load average at start: {load0[0]:.2f} {load0[1]:.2f} {load0[2]:.2f}")
    say(f"# {'transport':>9} {'size':>10} {'reqs':>5} {'t_comm':>10} {'t_compute':>10} "
        f"{'t_overlap':>10} {'hidden':>7} {'q1':>7} {'q3':>7} {'cpu':>5}")
    say(f"# {'':>9} {'(B)':>10} {'':>5} {'(us)':>10} {'(us)':>10} {'(us)':>10} {'(%)':>7} "
        f"{'(%)':>7} {'(%)':>7} {'(%)':>5}")
    hidden_all = {t: [] for t, _ in transports}
    starved = 0                     # rows whose compute got less than 90 % of a core
    step = 0
    for tname, tr in transports:
        for size in sizes:
            step += 1
            fault_point(step)
            count = size // 4
            bufs = [torch.ones(count) for _ in range(nreq)]
            outs = [torch.empty(count) for _ in range(nreq)]
            comm_round(bufs, outs, tr)                     # warm-up: buffers, scratch, tags
            t_comm0 = float(np.median(slowest([local_time(lambda: comm_round(bufs, outs, tr))
                                               for _ in range(3)])))
            k = calibrate(t_comm0)
            runs = {
                "comm": lambda: comm_round(bufs, outs, tr),
                "compute": lambda: compute(k),
                "both": lambda: comm_round(bufs, outs, tr, work=k),
            }
            local = {kind: np.empty(reps) for kind in _KINDS}
            shares_cpu: list[float] = []
            for i in range(reps):
                for kind in rotation(i):
                    local[kind][i] = local_time(runs[kind],
                                                shares_cpu if kind == "compute" else None)
            t = {kind: slowest(local[kind]) for kind in _KINDS}
            lowest = min_over_ranks(comm, shares_cpu)
            cpu_share = float(np.median(lowest))
            shares = hidden_shares(t["comm"], t["compute"], t["both"])
            hidden = float(np.median(shares))
            q1, q3 = (float(v) for v in np.percentile(shares, [25, 75]))
            med = {kind: float(np.median(t[kind])) for kind in _KINDS}
            hidden_all[tname].append(hidden)
            starved += cpu_share < 0.9
            say(f"  {tname:>9} {size:>10} {nreq:>5} {med['comm']:>10.1f} "
                f"{med['compute']:>10.1f} {med['both']:>10.1f} {100 * hidden:>7.1f} "
                f"{100 * q1:>7.1f} {100 * q3:>7.1f} {100 * cpu_share:>5.0f}")
            if rank == 0:
                table.append({"transport": tname, "size": size, "requests": nreq, "reps": reps,
                              "t_comm": med["comm"], "t_compute": med["compute"],
                              "t_overlap": med["both"], "hidden": hidden, "hidden_q1": q1,
                              "hidden_q3": q3, "cpu_share": cpu_share})
    load1 = os.getloadavg()
    say(f"# load average at end: {load1[0]:.2f} {load1[1]:.2f} {load1[2]:.2f}")
    for tname, hs in hidden_all.items():
        say(f"# mean hidden ({tname}): {100 * float(np.mean(hs)):.1f} %")
    if starved:
        say(f"# {starved} row(s) with cpu < 90 %: other jobs held the cores, so the "
            f"communication's CPU work could not hide there; compare rows with cpu ~100 %")
    if rank == 0:
        rf.set_attrs(**{f"mean_hidden_{t}": float(np.mean(hs)) for t, hs in hidden_all.items()},
                     mean_hidden=float(np.mean(hidden_all[transports[-1][0]])),
                     overlap_factor=float(factor), overlap_reps=int(reps),
                     loadavg_start=list(load0), loadavg_end=list(load1),
                     rows_cpu_below_0_9=int(starved))
    return 0


"""Benchmark of gradient compression: local cost, selection quality, allreduce on modelled links.

Run under MPI, e.g.::

    mpiexec -n 4 python -m hpcbench.collectives.compress_bench \\
        --compressors topk,thresholdv --sizes-mb 100 --link 100Mbit,1Gbit,10Gbit

Tables written (HDF5, kind ``"compress"``): ``local`` (rank 0 alone, others
sleeping in a barrier: compress/decompress time, throughput, wire ratio,
recall vs exact top-k, and speed relative to ``torch.topk(|x|, k)`` timed on
the same sizes in the same run), ``allreduce`` (end-to-end time of error-compensated
compressed allreduce vs the dense ring allreduce on the same modelled link,
measured side by side in one run: max over ranks, median over repeats) and,
with ``--convergence``, ``convergence`` (digits MLP, see
:mod:`hpcbench.compress.convergence`). ``compress_ratio`` is the fraction of
elements kept.

Where the time goes. Every allreduce row also holds a per-rank breakdown
(:class:`~hpcbench.collectives.compressed.profile.PhaseProfile`): thread CPU
seconds of the whole step (mean over ranks), wall and CPU of the ``encode``
phase (error feedback + compression) and of the ``decode`` phase (max over
ranks), the modelled wire time (seconds this rank's link was busy,
max over ranks) and the bytes rank 0 sent per step (``wire MB``). Nothing
is modelled but the wire: compute is measured.
``--outputs dense,sparse`` adds rows where sparse compressors return the
:class:`~hpcbench.collectives.compressed.sparse_sum.SparseSum` (the form a
sparse optimizer applies) instead of a dense tensor.
"""

from __future__ import annotations

import argparse
import math
import os
import statistics
import time

import numpy as np
import torch
from mpi4py import MPI

from hpcbench.collectives.compressed import PhaseProfile, compressed_allreduce, dense_allreduce
from hpcbench.collectives.linkmodel import BandwidthTrace, LinkTransport, parse_rate
from hpcbench.compress import ErrorFeedback, create, names, payload_nbytes
from hpcbench.results import Column, ResultsFile
from hpcbench.runtime.provenance import collect, gather_hostnames, utc_now
from hpcbench.runtime.wait import sleep_barrier

__all__ = ["main", "build_parser"]

APPROXIMATE = ("randomk", "threshold", "thresholdv", "blockthreshold", "dgc")


def _csv(kind):
    def parse(text):
        items = [t.strip() for t in str(text).split(",") if t.strip()]
        if not items:
            raise argparse.ArgumentTypeError("empty list")
        try:
            return [kind(t) for t in items]
        except ValueError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None
    return parse


def _compressor_name(text):
    if text not in names():
        raise ValueError(f"unknown compressor {text!r}; choose from {', '.join(names())}")
    return text


def _positive_mb(text):
    v = float(text)
    if not v > 0:
        raise ValueError(f"size must be > 0 MB, got {text!r}")
    return v


def _link(text):
    parse_rate(text)
    return text


def _output(text):
    if text not in ("dense", "sparse"):
        raise ValueError(f"output must be dense or sparse, got {text!r}")
    return text


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="hpcbench compress", description=__doc__.split("\n")[0])
    p.add_argument("--compressors", type=_csv(_compressor_name), default=["none", "topk", "thresholdv"],
                   help=f"comma list from: {', '.join(names())}")
    p.add_argument("--sizes-mb", type=_csv(_positive_mb), default=[4.0],
                   help="gradient sizes in MB of float32 (comma list)")
    p.add_argument("--ratio", type=float, default=0.01, help="compress_ratio: fraction KEPT, (0, 1]")
    p.add_argument("--link", type=_csv(_link), default=["1Gbit"], help="modelled bandwidths, e.g. 100Mbit,1Gbit,10Gbit")
    p.add_argument("--alpha", type=float, default=5e-5, help="per-message latency in seconds")
    p.add_argument("--trace", default=None, help="MobiPerf JSON trace file: replay its bandwidth instead of --link")
    p.add_argument("--trace-index", type=int, default=0)
    p.add_argument("--trace-scale", type=float, default=1.0, help="multiply trace rates (e.g. 1000)")
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--warmup", type=int, default=2,
                   help="untimed steps first (warm thresholds; load the compiled loops)")
    p.add_argument("--no-allreduce", action="store_true", help="local measurements only")
    p.add_argument("--outputs", type=_csv(_output), default=["dense"],
                   help="result forms of the sparse compressors: dense (tensor), sparse (SparseSum)")
    p.add_argument("--threads", type=int, default=1, help="torch intra-op threads per rank (>= 1)")
    p.add_argument("--convergence", action="store_true", help="also run the digits convergence check")
    p.add_argument("--steps", type=int, default=1200, help="training steps of --convergence")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", default="results/compress.h5", help="HDF5 output file")
    return p


def _check(p, a):
    if not 0 < a.ratio <= 1:
        p.error(f"--ratio (compress_ratio, fraction kept) must be in (0, 1], got {a.ratio}")
    if a.alpha < 0:
        p.error(f"--alpha must be >= 0, got {a.alpha}")
    if a.repeats < 1 or a.warmup < 0 or a.steps < 1:
        p.error("--repeats and --steps must be >= 1, --warmup >= 0")
    if a.trace_scale <= 0:
        p.error("--trace-scale must be > 0")
    if a.threads < 1:
        p.error(f"--threads must be >= 1, got {a.threads}")


def _make(name, ratio, rank):
    kw = {}
    if name in ("topk", "randomk", "thresholdv", "blockthreshold", "dgc"):
        kw["compress_ratio"] = ratio
    if name in ("qsgd", "terngrad"):
        kw["seed"] = rank
    return create(name, **kw)


def _grad(n, step, rank, seed):
    g = torch.Generator().manual_seed(seed * 7919 + rank)
    base = torch.randn(n, generator=g)
    g.manual_seed(seed * 7919 + rank + 1000 * (step + 1))
    return base.add_(torch.randn(n, generator=g), alpha=0.3)


def _local(name, n, a):
    """Rank 0 only: median compress/decompress time, wire bytes, recall."""
    c = _make(name, a.ratio, 0)
    if c.kind == "lowrank":
        return None
    ct, dt, rec = [], [], []
    for step in range(a.warmup + a.repeats):
        x = _grad(n, step, 0, a.seed)
        t = time.perf_counter()
        payload, ctx = c.compress(x, "g")
        t1 = time.perf_counter()
        c.decompress(payload, ctx)
        t2 = time.perf_counter()
        if step >= a.warmup:
            ct.append(t1 - t)
            dt.append(t2 - t1)
            if name in APPROXIMATE and n:
                y = c.decompress(payload, ctx).view(-1)
                k = max(1, int(np.ceil(a.ratio * n)))
                ref = torch.topk(x.abs(), k).indices
                rec.append(float((y[ref] != 0).float().mean()))
    cs = statistics.median(ct)
    return {"compress_s": cs, "decompress_s": statistics.median(dt),
            "throughput_GBps": 4 * n / cs / 1e9 if cs > 0 else 0.0,
            "wire_ratio": payload_nbytes(payload) / max(1, 4 * n),
            "recall": statistics.mean(rec) if rec else float("nan")}


def _torch_topk_s(n, a):
    """Rank 0 only: median seconds of ``torch.topk(x.abs(), k)`` (the reference selection)."""
    k = max(1, int(np.ceil(a.ratio * n)))
    ts = []
    for step in range(a.warmup + a.repeats):
        x = _grad(n, step, 0, a.seed)
        t = time.perf_counter()
        torch.topk(x.abs(), k, sorted=False)
        if step >= a.warmup:
            ts.append(time.perf_counter() - t)
    return statistics.median(ts)


#: per-step statistics of :func:`_timed` and how each is reduced over ranks
STATS = (("time", max), ("cpu", statistics.mean), ("encode", max), ("encode_cpu", max),
         ("decode", max), ("decode_cpu", max), ("wire", max))


def _timed(comm, fn, a, tr) -> dict:
    """Run ``fn(step, profile)`` warmup + repeats times between barriers.

    Each step's :data:`STATS` are reduced over ranks (``time``: slowest rank's
    wall seconds), then the median over the timed repeats is taken per
    statistic. ``wire`` is the modelled busy time of the rank's outgoing link.
    """
    rows = []
    for step in range(a.warmup + a.repeats):
        prof = PhaseProfile()
        sleep_barrier(comm)
        busy = tr.modelled_busy_s
        t, c = time.perf_counter(), time.thread_time()
        fn(step, prof)
        wall, cpu = time.perf_counter() - t, time.thread_time() - c
        mine = (wall, cpu, prof.wall.get("encode", math.nan), prof.cpu.get("encode", math.nan),
                prof.wall.get("decode", math.nan), prof.cpu.get("decode", math.nan),
                tr.modelled_busy_s - busy)
        per_rank = comm.allgather(mine)
        if step >= a.warmup:
            rows.append([red([r[i] for r in per_rank]) for i, (_, red) in enumerate(STATS)])
    return {name: statistics.median(r[i] for r in rows) for i, (name, _) in enumerate(STATS)}


def _breakdown(r: dict) -> str:
    def ms(v):
        return f"{1e3 * v:>8.1f}" if math.isfinite(v) else f"{'-':>8}"
    return (f"{ms(r['cpu'])}{ms(r['encode'])}{ms(r['encode_cpu'])}{ms(r['decode'])}"
            f"{ms(r['decode_cpu'])}{ms(r['wire'])}")


def main(argv=None) -> int:
    parser = build_parser()
    a = parser.parse_args(argv)
    _check(parser, a)
    trace = None
    if a.trace:
        try:
            trace = BandwidthTrace.from_mobiperf(a.trace, a.trace_index, scale=a.trace_scale)
        except (OSError, ValueError) as exc:
            parser.error(f"--trace: {exc}")
    torch.set_num_threads(a.threads)
    comm = MPI.COMM_WORLD
    rank = comm.rank
    start = utc_now()
    attrs = collect(comm, gather_hostnames(comm), a.seed, start)
    links = ["trace"] if trace else a.link
    rf = ResultsFile(a.out, "compress", vars(a), attrs) if rank == 0 else None
    try:
        if rank == 0:
            t_local = rf.table("local", [
                Column("compressor", "str", "1"), Column("size_bytes", "i8", "B"),
                Column("compress_ratio", "f8", "1", "fraction of elements kept"),
                Column("compress_s", "f8", "s"), Column("decompress_s", "f8", "s"),
                Column("throughput", "f8", "GB/s", "input bytes / compress time"),
                Column("wire_ratio", "f8", "1", "payload bytes / dense bytes"),
                Column("recall", "f8", "1", "fraction of exact top-k selected (NaN if n/a)"),
                Column("vs_torch_topk", "f8", "1",
                       "time of torch.topk(|x|, k) on the same size / compress time")],
                "rank 0 alone, median over repeats after warmup")
            t_ar = rf.table("allreduce", [
                Column("compressor", "str", "1"), Column("size_bytes", "i8", "B"),
                Column("link", "str", "1"), Column("alpha", "f8", "s"),
                Column("output", "str", "1", "result form: dense tensor or SparseSum"),
                Column("time", "f8", "s", "compressed allreduce with error feedback, max over ranks"),
                Column("dense_time", "f8", "s", "dense ring allreduce on the same link"),
                Column("speedup", "f8", "1", "dense_time / time"),
                Column("wire_bytes", "i8", "B", "bytes rank 0 sent per compressed allreduce"),
                Column("dense_wire_bytes", "i8", "B", "bytes rank 0 sent per dense allreduce"),
                Column("cpu", "f8", "s", "thread CPU seconds per step, mean over ranks"),
                Column("encode", "f8", "s", "wall of error feedback + compress, max over ranks"),
                Column("encode_cpu", "f8", "s", "CPU of error feedback + compress, max over ranks"),
                Column("decode", "f8", "s", "wall of turning payloads into the result, max over ranks"),
                Column("decode_cpu", "f8", "s", "CPU of the decode phase, max over ranks"),
                Column("wire", "f8", "s", "modelled busy time of a rank's link, max over ranks"),
                Column("dense_cpu", "f8", "s", "thread CPU seconds of the dense step, mean over ranks")],
                f"world size {comm.size}, median over repeats")
            print(f"# hpcbench compress: {comm.size} ranks on {os.cpu_count()} cores, "
                  f"{a.threads} thread(s) each, ratio kept {a.ratio}, links {links}")
            print(f"{'compressor':<15}{'MB':>8}{'comp ms':>10}{'dec ms':>9}{'GB/s':>8}{'wire':>9}{'recall':>8}"
                  f"{'vs topk':>9}")
        for mb in a.sizes_mb:
            n = int(mb * 1e6 / 4)
            if rank == 0:
                ref = _torch_topk_s(n, a)
                print(f"{'(torch.topk)':<15}{mb:>8.2f}{1e3 * ref:>10.2f}{'-':>9}{4 * n / ref / 1e9:>8.2f}"
                      f"{'-':>9}{1.0:>8.3f}{1.0:>9.2f}", flush=True)
            for name in a.compressors:
                if rank == 0:
                    r = _local(name, n, a)
                    if r:
                        vs = ref / r["compress_s"] if r["compress_s"] > 0 else math.inf
                        t_local.append({"compressor": name, "size_bytes": 4 * n, "compress_ratio": a.ratio,
                                        "compress_s": r["compress_s"], "decompress_s": r["decompress_s"],
                                        "throughput": r["throughput_GBps"], "wire_ratio": r["wire_ratio"],
                                        "recall": r["recall"], "vs_torch_topk": vs})
                        print(f"{name:<15}{mb:>8.2f}{1e3 * r['compress_s']:>10.2f}{1e3 * r['decompress_s']:>9.2f}"
                              f"{r['throughput_GBps']:>8.2f}{r['wire_ratio']:>9.4f}{r['recall']:>8.3f}"
                              f"{vs:>9.2f}", flush=True)
                sleep_barrier(comm)
        if not a.no_allreduce:
            if rank == 0:
                print(f"\n{'compressor':<15}{'output':>7}{'MB':>8}{'link':>9}{'time s':>9}{'dense s':>9}"
                      f"{'speedup':>8} |{'cpu ms':>8}{'enc ms':>8}{'enc cpu':>8}{'dec ms':>8}{'dec cpu':>8}"
                      f"{'wire ms':>8}{'wire MB':>8}")
            for link in links:
                tr = LinkTransport(comm, alpha=a.alpha, beta=link if not trace else 1.0, trace=trace)
                for mb in a.sizes_mb:
                    n = int(mb * 1e6 / 4)
                    x = _grad(n, 0, rank, a.seed)
                    b0 = tr.bytes_sent
                    dense = _timed(comm, lambda s, prof: dense_allreduce(x, transport=tr), a, tr)
                    dense_bytes = (tr.bytes_sent - b0) // (a.warmup + a.repeats)
                    if rank == 0:
                        print(f"{'(dense ring)':<15}{'dense':>7}{mb:>8.2f}{link:>9}{dense['time']:>9.4f}"
                              f"{dense['time']:>9.4f}{1.0:>8.2f} |{_breakdown(dense)}{dense_bytes / 1e6:>8.2f}",
                              flush=True)
                    out = torch.empty(n)
                    for name in a.compressors:
                        for form in a.outputs:
                            c, mem = _make(name, a.ratio, rank), ErrorFeedback()
                            if form == "sparse" and c.kind not in ("sparse", "shared_sparse"):
                                continue
                            xs = [_grad(n, s, rank, a.seed) for s in range(2)]
                            b0 = tr.bytes_sent
                            r = _timed(comm, lambda s, prof: compressed_allreduce(
                                xs[s % 2], "g", c, mem, transport=tr, out=out if form == "dense" else None,
                                output=form, profile=prof), a, tr)
                            wire = (tr.bytes_sent - b0) // (a.warmup + a.repeats)
                            if rank == 0:
                                t = r["time"]
                                t_ar.append({"compressor": name, "size_bytes": 4 * n, "link": link,
                                             "alpha": a.alpha, "output": form, "time": t,
                                             "dense_time": dense["time"], "speedup": dense["time"] / t,
                                             "wire_bytes": wire, "dense_wire_bytes": dense_bytes,
                                             "cpu": r["cpu"], "encode": r["encode"],
                                             "encode_cpu": r["encode_cpu"], "decode": r["decode"],
                                             "decode_cpu": r["decode_cpu"], "wire": r["wire"],
                                             "dense_cpu": dense["cpu"]})
                                print(f"{name:<15}{form:>7}{mb:>8.2f}{link:>9}{t:>9.4f}{dense['time']:>9.4f}"
                                      f"{dense['time'] / t:>8.2f} |{_breakdown(r)}{wire / 1e6:>8.2f}", flush=True)
                tr.free()
        if a.convergence:
            from hpcbench.compress.convergence import train
            rows = [train(name, comm, steps=a.steps, seed=a.seed) for name in a.compressors]
            if rank == 0:
                dense_acc = next((r["test_accuracy"] for r in rows if r["compressor"] == "none"), float("nan"))
                t_cv = rf.table("convergence", [
                    Column("compressor", "str", "1"), Column("final_loss", "f8", "1", "train cross-entropy"),
                    Column("test_accuracy", "f8", "1"), Column("accuracy_drop", "f8", "1", "dense minus this"),
                    Column("wire_bytes", "i8", "B", "bytes rank 0 sent during training"),
                    Column("lr_scale", "f8", "1", "multiplier of SGD's learning rate (compressor.lr_scale)")],
                    f"digits MLP, {a.steps} steps, error feedback")
                print(f"\n{'compressor':<15}{'loss':>9}{'test acc':>10}{'drop pts':>10}{'lr x':>7}")
                for r in rows:
                    t_cv.append({"compressor": r["compressor"], "final_loss": r["final_loss"],
                                 "test_accuracy": r["test_accuracy"],
                                 "accuracy_drop": dense_acc - r["test_accuracy"], "wire_bytes": r["wire_bytes"],
                                 "lr_scale": r["lr_scale"]})
                    print(f"{r['compressor']:<15}{r['final_loss']:>9.4f}{r['test_accuracy']:>10.4f}"
                          f"{100 * (dense_acc - r['test_accuracy']):>10.2f}{r['lr_scale']:>7.3g}")
    except BaseException as exc:
        if rf is not None:
            rf.close("failed", error=f"{type(exc).__name__}: {exc}")
        raise
    if rf is not None:
        rf.close("completed")
        print(f"\nwrote {a.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

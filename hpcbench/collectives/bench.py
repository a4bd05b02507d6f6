"""Collective benchmark (OSU / nccl-tests style): custom algorithms beside MPI, gloo, Horovod.

Run ``mpiexec -n N python -m hpcbench.collectives.bench [options]`` (or
``hpcbench collectives``). For every message size of the sweep and every
implementation it prints one row::

    size(B) count type redop impl time(us) p50(us) p99(us) algbw(GB/s) busbw(GB/s) vs_mpi #wrong

``time`` is the mean over iterations of the per-iteration time, which is the
maximum over ranks (ranks are synchronised by a sleeping barrier before each
iteration). ``algbw = size / time``; ``busbw`` as nccl-tests: allreduce
``algbw * 2(n-1)/n``, reduce_scatter and allgather ``algbw * (n-1)/n``, bcast
``algbw``. ``size`` is the full buffer (allreduce, bcast), the input of
reduce_scatter, the output of allgather. ``vs_mpi`` is time / MPI's time.
``#wrong`` counts elements differing from a reference computed locally (every
rank can generate every rank's input), summed over ranks.

``--overlap`` instead measures how much of ``iallreduce`` traffic hides behind
torch matmuls (see :mod:`hpcbench.collectives.overlap`): per interleaved
repetition ``1 - (t_both - t_compute) / t_comm``, median over repetitions.
"""

from __future__ import annotations

import argparse
import os
import re
import socket
import sys
import time
from pathlib import Path

import numpy as np
from mpi4py import MPI

__all__ = ["main", "parse_size", "build_parser"]

OPS = ("allreduce", "reduce_scatter", "allgather", "bcast")
DTYPES = ("float32", "float64", "bfloat16", "int64")
REDOPS = ("sum", "avg", "max", "min")
BASELINES = ("mpi", "gloo", "horovod")
_ITEMSIZE = {"float32": 4, "float64": 8, "bfloat16": 2, "int64": 8}


def custom_algorithms(op: str) -> list[str]:
    """Custom implementations benchmarked for ``op``."""
    if op == "allreduce":
        from hpcbench.collectives.algorithms import names
        return ["auto", *names()]
    return {"reduce_scatter": ["ring"], "allgather": ["ring"], "bcast": ["tree"]}[op]


def parse_size(text: str) -> int:
    """Bytes from ``"64"``, ``"8K"``, ``"4M"``, ``"1G"`` (powers of 1024).

    Raises
    ------
    argparse.ArgumentTypeError
        If the text is not a non-negative size.
    """
    m = re.fullmatch(r"\s*(\d+)\s*([KMG]?)i?B?\s*", str(text), flags=re.IGNORECASE)
    if not m:
        raise argparse.ArgumentTypeError(f"invalid size {text!r} (examples: 64, 8K, 4M, 1G)")
    return int(m.group(1)) * {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30}[m.group(2).upper()]


def _positive_int(text: str) -> int:
    try:
        v = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"invalid int {text!r}") from None
    if v < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1, got {v}")
    return v


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="hpcbench collectives",
                                description="Collective algorithms against MPI, gloo and Horovod.")
    p.add_argument("-b", "--minbytes", type=parse_size, default=parse_size("1K"),
                   help="smallest message size in bytes, K/M/G suffixes (default 1K)")
    p.add_argument("-e", "--maxbytes", type=parse_size, default=parse_size("16M"),
                   help="largest message size (default 16M)")
    p.add_argument("-f", "--stepfactor", type=_positive_int, default=4,
                   help="multiply the size by this factor between rows (>= 2, default 4)")
    p.add_argument("-o", "--op", choices=OPS, default="allreduce")
    p.add_argument("-d", "--dtype", choices=DTYPES, default="float32")
    p.add_argument("-r", "--redop", choices=REDOPS, default="sum")
    p.add_argument("-a", "--algorithms", default="",
                   help="comma list of implementations: custom algorithm names, mpi, gloo, "
                        "horovod (default: all)")
    p.add_argument("-w", "--warmup", type=_positive_int, default=5,
                   help="warm-up iterations at the smallest size (shrinks with size)")
    p.add_argument("-n", "--iters", type=_positive_int, default=50,
                   help="timed iterations at the smallest size (shrinks with size, >= 5)")
    p.add_argument("--overlap", action="store_true",
                   help="measure the share of iallreduce time hidden behind matmuls "
                        "(hpcbench.collectives.overlap)")
    p.add_argument("--overlap-reps", type=_positive_int, default=9, metavar="N",
                   help="--overlap: interleaved repetitions of comm / compute / both per "
                        "size (default 9)")
    p.add_argument("--overlap-factor", type=float, default=2.0, metavar="F",
                   help="--overlap: compute lasts F times the comm-only time (default 2; "
                        "the OSU benchmarks use 1)")
    p.add_argument("--link", default=None, metavar="RATE",
                   help="run the custom algorithms over the link-model transport "
                        "(hpcbench.collectives.linkmodel) at this bandwidth, e.g. 1Gbit, "
                        "10Gbit; mpi/gloo/horovod still use the real (shared-memory) path")
    p.add_argument("--link-alpha", type=float, default=0.0, metavar="SECONDS",
                   help="per-message latency of the modelled link (default 0)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--output", default=None,
                   help="HDF5 result file (default results/collectives-<op>-<time>.h5)")
    return p


def _parse(argv):
    p = build_parser()
    args = p.parse_args(argv)
    if args.stepfactor < 2:
        p.error(f"argument -f/--stepfactor: must be >= 2, got {args.stepfactor}")
    if args.link is not None:
        from hpcbench.collectives.linkmodel import parse_rate
        try:
            args.link_bps = parse_rate(args.link)
        except ValueError as exc:
            p.error(f"argument --link: {exc}")
    else:
        args.link_bps = None
    if not (args.link_alpha >= 0 and args.link_alpha == args.link_alpha
            and args.link_alpha != float("inf")):
        p.error(f"argument --link-alpha: must be a finite latency >= 0 s, got {args.link_alpha}")
    if not (0 < args.overlap_factor < 100):
        p.error(f"argument --overlap-factor: must be in (0, 100), got {args.overlap_factor}")
    if args.minbytes > args.maxbytes:
        p.error(f"argument -b/--minbytes: {args.minbytes} exceeds -e/--maxbytes {args.maxbytes}")
    allowed = custom_algorithms(args.op) + list(BASELINES)
    if args.algorithms:
        impls = [a.strip() for a in args.algorithms.split(",") if a.strip()]
        bad = [a for a in impls if a not in allowed]
        if bad or not impls:
            p.error(f"argument -a/--algorithms: unknown {bad or args.algorithms!r}; "
                    f"choose from {', '.join(allowed)}")
    else:
        impls = allowed
    if "mpi" in impls:        # MPI is the reference for the ratio column: run it first
        impls = ["mpi"] + [a for a in impls if a != "mpi"]
    args.impls = impls
    return args


# -- data and reference --------------------------------------------------------------------

def _pattern(rank: int, count: int, offset: int = 0) -> np.ndarray:
    """Small integer values (exact in bfloat16 sums up to 64 ranks) as float64."""
    i = np.arange(offset, offset + count, dtype=np.int64)
    return (((i * 7 + rank * 3) % 5) - 2).astype(np.float64)


def _as(arr64: np.ndarray, dtype: str, torch_needed: bool):
    import torch
    if dtype == "bfloat16":
        return torch.from_numpy(arr64).to(torch.bfloat16)
    a = arr64.astype(dtype)
    return torch.from_numpy(a) if torch_needed else a


def _reference(n: int, count: int, redop: str, dtype: str, op: str, rank: int) -> np.ndarray:
    if op == "bcast":
        return _pattern(0, count)
    if op == "allgather":
        return np.concatenate([_pattern(r, count) for r in range(n)])
    stack = np.stack([_pattern(r, count) for r in range(n)]) if count else np.zeros((n, 0))
    ref = {"sum": stack.sum(0), "avg": stack.sum(0), "max": stack.max(0), "min": stack.min(0)}[redop]
    if redop == "avg":
        ref = np.floor_divide(ref, n) if dtype == "int64" else ref / n
    if op == "reduce_scatter":
        m = count // n
        ref = ref[rank * m:(rank + 1) * m]
    return ref


def _count_wrong(result, ref: np.ndarray, dtype: str) -> int:
    import torch
    got = result.to(torch.float64).numpy() if isinstance(result, torch.Tensor) else \
        np.asarray(result, dtype=np.float64)
    got = got.reshape(-1)
    if got.size != ref.size:
        return max(got.size, ref.size)
    tol = {"float32": 1e-5, "float64": 1e-12, "bfloat16": 1e-2, "int64": 0.0}[dtype]
    return int(np.count_nonzero(np.abs(got - ref) > tol * np.maximum(1.0, np.abs(ref))))


# -- implementations -----------------------------------------------------------------------

class _Case:
    """Buffers and a callable ``run()`` of one implementation at one size."""

    def __init__(self, impl, op, dtype, redop, count, comm, env):
        import torch

        tr = env.get("link")
        self.result = None
        n, r = comm.size, comm.rank
        mpi_op = {"sum": MPI.SUM, "avg": MPI.SUM, "max": MPI.MAX, "min": MPI.MIN}[redop]
        in_count = count if op in ("allreduce", "reduce_scatter", "bcast") else count // n
        is_torch = impl in ("gloo", "horovod") or dtype == "bfloat16"
        src = _pattern(0 if op == "bcast" and r != 0 else r, in_count)
        if op == "bcast" and r != 0:
            src[:] = -7
        x = _as(src, dtype, is_torch)
        self.x = x
        if op == "allreduce":
            out = x.clone() if is_torch else np.empty_like(x)
        elif op == "reduce_scatter":
            out = (torch.empty(count // n, dtype=x.dtype) if is_torch
                   else np.empty(count // n, dtype=x.dtype))
        elif op == "allgather":
            out = (torch.empty(count, dtype=x.dtype) if is_torch
                   else np.empty(count, dtype=x.dtype))
        else:
            out = x
        self.out = out
        div = redop == "avg"
        if impl == "mpi":
            if dtype == "bfloat16":
                raise NotImplementedError("MPI has no bfloat16")

            def finish():
                if div:
                    if dtype == "int64":
                        np.floor_divide(out, n, out=out)
                    else:
                        np.divide(out, n, out=out)
            if op == "allreduce":
                def run():
                    comm.Allreduce(x, out, op=mpi_op)
                    finish()
            elif op == "reduce_scatter":
                def run():
                    comm.Reduce_scatter_block(x, out, op=mpi_op)
                    finish()
            elif op == "allgather":
                def run():
                    comm.Allgather(x, out)
            else:
                def run():
                    comm.Bcast(x, root=0)
        elif impl == "gloo":
            import torch.distributed as dist
            rop = {"sum": dist.ReduceOp.SUM, "avg": dist.ReduceOp.SUM, "max": dist.ReduceOp.MAX,
                   "min": dist.ReduceOp.MIN}[redop]
            fin = (lambda t: t.div_(n, rounding_mode="floor") if dtype == "int64" else t.div_(n)) \
                if div else (lambda t: None)
            if op == "allreduce":
                def run():          # gloo reduces in place: refresh from x, as out-of-place
                    out.copy_(x)
                    dist.all_reduce(out, op=rop)
                    fin(out)
            elif op == "reduce_scatter":
                chunks = list(x.chunk(n)) if count else [x[:0]] * n
                def run():
                    dist.reduce_scatter(out, chunks, op=rop)
                    fin(out)
            elif op == "allgather":
                parts = list(out.chunk(n)) if count else [out[:0]] * n
                def run():
                    dist.all_gather(parts, x)
            else:
                def run():
                    dist.broadcast(x, src=0)
        elif impl == "horovod":
            hvd = env["horovod"]
            hop = {"sum": hvd.Sum, "avg": hvd.Average, "max": hvd.Max, "min": hvd.Min}[redop]
            if op == "allreduce":
                def run():
                    hvd.allreduce_(out.copy_(x), op=hop, name="bench")
            elif op == "reduce_scatter":
                def run():
                    out.copy_(hvd.reducescatter(x, op=hop, name="bench"))
            elif op == "allgather":
                def run():
                    out.copy_(hvd.allgather(x, name="bench"))
            else:
                def run():
                    hvd.broadcast_(x, root_rank=0, name="bench")
        else:
            import hpcbench.collectives as hc
            kw = {"comm": comm} if tr is None else {"transport": tr}
            if op == "allreduce":
                def run():
                    hc.allreduce(x, out, op=redop, algorithm=impl, **kw)
            elif op == "reduce_scatter":
                def run():
                    hc.reduce_scatter(x, out, op=redop, **kw)
            elif op == "allgather":
                def run():
                    hc.allgather(x, out, **kw)
            else:
                def run():
                    hc.bcast(x, 0, **kw)
        self.run = run


def _init_gloo(comm):
    """torch.distributed with gloo; rank and world from MPI, TCP store on rank 0's host."""
    import torch.distributed as dist
    if dist.is_initialized():
        return None
    if "MASTER_ADDR" in os.environ and "MASTER_PORT" in os.environ:
        url = "env://"
    else:
        if comm.rank == 0:
            with socket.socket() as s:
                s.bind(("", 0))
                port = s.getsockname()[1]
            host = socket.gethostname() if comm.size > 1 else "127.0.0.1"
            addr = "127.0.0.1" if _single_host(comm) else socket.gethostbyname(host)
        else:
            port = addr = None
        if not _single_host(comm):
            pass
        addr, port = comm.bcast((addr, port) if comm.rank == 0 else None, root=0)
        url = f"tcp://{addr}:{port}"
    try:
        dist.init_process_group("gloo", init_method=url, rank=comm.rank, world_size=comm.size)
    except Exception as exc:  # noqa: BLE001 - reported and skipped
        return f"gloo: init failed ({type(exc).__name__}: {exc}); skipping"
    return None


_SINGLE = None


def _single_host(comm) -> bool:
    global _SINGLE
    if _SINGLE is None:
        _SINGLE = len(set(comm.allgather(socket.gethostname()))) == 1
    return _SINGLE


def _init_horovod(comm):
    try:
        import horovod.torch as hvd
    except Exception as exc:  # noqa: BLE001 - any import failure means "not available"
        return None, f"horovod: not installed (import horovod.torch failed: {exc}); skipping"
    hvd.init()
    if hvd.size() != comm.size:
        return None, f"horovod: world size {hvd.size()} != {comm.size}; skipping"
    return hvd, None


def _make_link(args, comm):
    """The link-model transport of ``--link`` (collective), or None."""
    if args.link_bps is None:
        return None
    from hpcbench.collectives.linkmodel import LinkTransport
    return LinkTransport(comm, alpha=args.link_alpha, beta=args.link_bps)


def _link_desc(args) -> str:
    if args.link_bps is None:
        return "none (shared-memory MPI)"
    return f"modelled {args.link_bps / 1e9:g} Gbit/s, alpha={args.link_alpha:g} s"


def _iters_for(nbytes: int, iters: int, warmup: int) -> tuple[int, int]:
    scale = max(1, nbytes // (64 << 10))
    it = max(5, iters // scale)
    return it, max(1, min(warmup, it // 2) if scale > 1 else warmup)


def _sizes(b: int, e: int, f: int) -> list[int]:
    out, s = [], b
    while s <= e:
        out.append(s)
        s = s * f if s else 1
        if s == 1 and f > 1 and b == 0:
            s = 1
    return out


def _busbw_factor(op: str, n: int) -> float:
    if op == "allreduce":
        return 2 * (n - 1) / n
    if op in ("reduce_scatter", "allgather"):
        return (n - 1) / n
    return 1.0


COLUMNS = [("size", "int64", "B", "message size (full buffer; see module docstring)"),
           ("count", "int64", "1", "elements in the buffer"),
           ("type", "str", "", "element type"),
           ("redop", "str", "", "reduction operation"),
           ("impl", "str", "", "implementation (custom algorithm, mpi, gloo, horovod)"),
           ("time", "float64", "us", "mean over iterations of the max-over-ranks time"),
           ("p50", "float64", "us", "median iteration time (max over ranks)"),
           ("p99", "float64", "us", "99th percentile iteration time (max over ranks)"),
           ("algbw", "float64", "GB/s", "size / time"),
           ("busbw", "float64", "GB/s", "algbw times the nccl-tests bus factor"),
           ("vs_mpi", "float64", "1", "time / time of MPI's own collective (nan if none)"),
           ("wrong", "int64", "1", "elements differing from the reference, all ranks")]


def _time_case(case, comm, iters, warmup):
    from hpcbench.runtime.wait import sleep_barrier
    for _ in range(warmup):
        case.run()
    times = np.empty(iters)
    for i in range(iters):
        # sleeping barrier (all ranks arrive without burning CPU), then MPI's own barrier
        # to line up the exits: a rank still waking from its sleep would otherwise start
        # up to a timer tick (~50-200 us) late and that skew, not the collective, would be
        # timed (OSU style: MPI_Barrier before each timed call). Same for every impl.
        sleep_barrier(comm)
        comm.Barrier()
        t0 = time.perf_counter()
        case.run()
        times[i] = time.perf_counter() - t0
    worst = np.empty_like(times)
    comm.Allreduce(times, worst, op=MPI.MAX)
    return worst * 1e6


def main(argv: list[str] | None = None) -> int:
    """Entry point (``hpcbench collectives``); returns the exit status."""
    comm = MPI.COMM_WORLD
    args = _parse(sys.argv[1:] if argv is None else argv)
    if args.overlap:
        from hpcbench.collectives.overlap import run_overlap
        sizes = _sizes(max(args.minbytes, 4096), args.maxbytes, args.stepfactor)
        return run_overlap(args, comm, sizes, _make_link(args, comm), _link_desc(args),
                           _progress())
    from hpcbench.results import Column, ResultsFile
    from hpcbench.runtime.provenance import collect, gather_hostnames, utc_now

    n, rank = comm.size, comm.rank
    start = utc_now()
    hosts = gather_hostnames(comm)
    say = print if rank == 0 else (lambda *a, **k: None)
    env = {}
    impls = list(args.impls)
    notes = []
    if "gloo" in impls:
        msg = _init_gloo(comm)
        if msg:
            notes.append(msg)
            impls.remove("gloo")
    if "horovod" in impls:
        hvd, msg = _init_horovod(comm)
        if msg:
            notes.append(msg)
            impls.remove("horovod")
        env["horovod"] = hvd
    if args.dtype == "bfloat16" and "mpi" in impls:
        notes.append("mpi: MPI has no bfloat16 type; skipping")
        impls.remove("mpi")
    env["link"] = _make_link(args, comm)
    if env["link"] is not None:
        notes.append(f"link: custom algorithms over {_link_desc(args)}; "
                     f"{', '.join(i for i in impls if i in BASELINES) or 'no baseline'} "
                     f"not modelled (vs_mpi compares modelled to real)")
    for line in notes:
        say(line)
    out_path = args.output or str(Path("results") /
                                  f"collectives-{args.op}-{start.replace(':', '')}.h5")
    config = {k: v for k, v in vars(args).items() if k not in ("impls", "link_bps")}
    config["impls"] = impls
    rf = table = None
    if rank == 0:
        rf = ResultsFile(out_path, "collectives", config,
                         attrs=collect(comm, hosts, args.seed, start))
        table = rf.table("results", [Column(*c) for c in COLUMNS],
                         "one row per message size per implementation")
    itemsize = _ITEMSIZE[args.dtype]
    fac = _busbw_factor(args.op, n)
    say(f"# hpcbench collectives: op={args.op} dtype={args.dtype} redop={args.redop} "
        f"ranks={n} hosts={len(set(hosts))} progress={_progress()} link={_link_desc(args)}")
    say(f"# {'size':>10} {'count':>10} {'type':>8} {'redop':>5} {'impl':>18} {'time':>10} "
        f"{'p50':>10} {'p99':>10} {'algbw':>7} {'busbw':>7} {'vs_mpi':>7} {'#wrong':>7}")
    say(f"# {'(B)':>10} {'(elems)':>10} {'':>8} {'':>5} {'':>18} {'(us)':>10} "
        f"{'(us)':>10} {'(us)':>10} {'(GB/s)':>7} {'(GB/s)':>7} {'(x)':>7} {'':>7}")
    busbw = {i: [] for i in impls}
    total_wrong = 0
    try:
        for size in _sizes(args.minbytes, args.maxbytes, args.stepfactor):
            count = size // itemsize
            if args.op in ("reduce_scatter", "allgather"):
                count -= count % n
            nbytes = count * itemsize
            iters, warm = _iters_for(nbytes, args.iters, args.warmup)
            mpi_time = float("nan")
            for impl in impls:
                try:
                    case = _Case(impl, args.op, args.dtype, args.redop, count, comm, env)
                except NotImplementedError as exc:
                    say(f"# {impl}: {exc}")
                    continue
                t = _time_case(case, comm, iters, warm)
                # correctness on fresh inputs
                case = _Case(impl, args.op, args.dtype, args.redop, count, comm, env)
                case.run()
                res = case.x if args.op == "bcast" else case.out
                ref = _reference(n, count, args.redop, args.dtype, args.op, rank)
                wrong = comm.allreduce(_count_wrong(res, ref, args.dtype))
                total_wrong += wrong
                mean = float(t.mean())
                algbw = nbytes / (mean * 1e3) if mean > 0 else 0.0
                bus = algbw * fac
                busbw[impl].append(bus)
                if impl == "mpi":
                    mpi_time = mean
                ratio = mean / mpi_time if mpi_time == mpi_time else float("nan")
                p50, p99 = np.percentile(t, [50, 99])
                say(f"  {nbytes:>10} {count:>10} {args.dtype:>8} {args.redop:>5} {impl:>18} "
                    f"{mean:>10.1f} {p50:>10.1f} {p99:>10.1f} {algbw:>7.3f} {bus:>7.3f} "
                    f"{ratio:>7.2f} {wrong:>7}")
                if rank == 0:
                    table.append({"size": nbytes, "count": count, "type": args.dtype,
                                  "redop": args.redop, "impl": impl, "time": mean, "p50": p50,
                                  "p99": p99, "algbw": algbw, "busbw": bus, "vs_mpi": ratio,
                                  "wrong": wrong})
        for impl in impls:
            if busbw[impl]:
                say(f"# Avg bus bandwidth {impl:>18}: {np.mean(busbw[impl]):.3f} GB/s")
        status = "OK" if total_wrong == 0 else "FAILED"
        say(f"# Check: {status} ({total_wrong} wrong elements)")
        if rank == 0:
            rf.set_attrs(check=status, wrong_elements=total_wrong, notes="\n".join(notes))
            rf.close("completed")
            say(f"# results: {out_path}")
    except BaseException as exc:
        if rf is not None:
            rf.close("failed", error=f"{type(exc).__name__}: {exc}")
        raise
    _shutdown(env)
    if env["link"] is not None:
        env["link"].free()
    return 0 if total_wrong == 0 else 1


def _progress() -> str:
    from hpcbench.collectives.progress import progress_mode
    return progress_mode()


def _shutdown(env) -> None:
    try:
        import torch.distributed as dist
        if dist.is_initialized():
            dist.destroy_process_group()
    except Exception:  # noqa: BLE001
        pass


if __name__ == "__main__":
    sys.exit(main())

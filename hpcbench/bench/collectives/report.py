"""The collective benchmark's sweep plan and table: sizes, iteration counts, bus factor, rows."""

from __future__ import annotations

from hpcbench.runtime.texttable import fmt

__all__ = ["COLUMNS", "sizes", "iters_for", "busbw_factor", "header", "row_text"]

#: HDF5 table ``results``: (name, dtype, units, description)
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


def iters_for(nbytes: int, iters: int, warmup: int) -> tuple[int, int]:
    """Timed and warm-up iterations at ``nbytes``: both shrink as messages pass 64 KiB (>= 5 timed)."""
    scale = max(1, nbytes // (64 << 10))
    it = max(5, iters // scale)
    return it, max(1, min(warmup, it // 2) if scale > 1 else warmup)


def sizes(b: int, e: int, f: int) -> list[int]:
    """Message sizes ``b, b*f, b*f^2, ... <= e`` (from 0: 0, 1, f, ...)."""
    out, s = [], b
    while s <= e:
        out.append(s)
        s = s * f if s else 1
    return out


def busbw_factor(op: str, n: int) -> float:
    """nccl-tests' bus-bandwidth factor: allreduce 2(n-1)/n; reduce_scatter, allgather (n-1)/n; bcast 1."""
    if op == "allreduce":
        return 2 * (n - 1) / n
    if op in ("reduce_scatter", "allgather"):
        return (n - 1) / n
    return 1.0


def header(args, n: int, nhosts: int, progress: str, link_text: str) -> list[str]:
    """The title and the two-line column header (names, then units)."""
    return [f"# hpcbench collectives: op={args.op} dtype={args.dtype} redop={args.redop} "
            f"ranks={n} hosts={nhosts} progress={progress} link={link_text} device={getattr(args, 'device', 'cpu')}"
            f"{' custom=nonblocking+wait' if getattr(args, 'nonblocking', False) else ''}"
            f" rounds={getattr(args, 'rounds', 1)}{' (interleaved)' if getattr(args, 'rounds', 1) > 1 else ''}",
            f"# {'size':>10} {'count':>10} {'type':>8} {'redop':>5} {'impl':>18} {'time':>10} "
            f"{'p50':>10} {'p99':>10} {'algbw':>7} {'busbw':>7} {'vs_mpi':>7} {'#wrong':>7}",
            f"# {'(B)':>10} {'(elems)':>10} {'':>8} {'':>5} {'':>18} {'(us)':>10} "
            f"{'(us)':>10} {'(us)':>10} {'(GB/s)':>7} {'(GB/s)':>7} {'(x)':>7} {'':>7}"]


def row_text(r: dict) -> str:
    """One printed row from a table row (:data:`COLUMNS` keys)."""
    return (f"  {r['size']:>10} {r['count']:>10} {r['type']:>8} {r['redop']:>5} {r['impl']:>18} "
            f"{r['time']:>10.1f} {r['p50']:>10.1f} {r['p99']:>10.1f} {r['algbw']:>7.3f} "
            f"{r['busbw']:>7.3f} {fmt(r['vs_mpi'], '.2f'):>7} {r['wrong']:>7}")

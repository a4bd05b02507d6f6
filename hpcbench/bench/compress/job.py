"""The compression benchmark as a lifecycle job: flags, checks, the three tables.

Tables written (HDF5, kind ``"compress"``): ``local`` (rank 0 alone, others
sleeping in a barrier: compress/decompress time, throughput, wire ratio,
recall vs exact top-k, and speed relative to ``torch.topk(|x|, k)`` timed on
the same sizes in the same run), ``allreduce`` (end-to-end time of error-compensated
compressed allreduce vs the dense ring allreduce on the same modelled link,
measured side by side in one run: max over ranks, median over repeats) and,
with ``--convergence``, ``convergence`` (digits MLP, see
:mod:`hpcbench.bench.compress.convergence`). ``ratio`` is the fraction of
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

from hpcbench.bench.compress.declaration import COMPRESS
from hpcbench.lifecycle import Job, job_arguments
from hpcbench.runtime.errors import InputError
from hpcbench.runtime.faults import fault_point
from hpcbench.runtime.texttable import fmt

__all__ = ["CompressJob"]

LOCAL_COLUMNS = [
    ("compressor", "str", "1", ""), ("size_bytes", "i8", "B", ""),
    ("ratio", "f8", "1", "fraction of elements kept"),
    ("compress_s", "f8", "s", ""), ("decompress_s", "f8", "s", ""),
    ("throughput", "f8", "GB/s", "input bytes / compress time"),
    ("wire_ratio", "f8", "1", "payload bytes / dense bytes"),
    ("recall", "f8", "1", "fraction of exact top-k selected (NaN if n/a)"),
    ("vs_torch_topk", "f8", "1", "time of torch.topk(|x|, k) on the same size / compress time")]
ALLREDUCE_COLUMNS = [
    ("compressor", "str", "1", ""), ("size_bytes", "i8", "B", ""),
    ("link", "str", "1", ""), ("alpha", "f8", "s", ""),
    ("output", "str", "1", "result form: dense tensor or SparseSum"),
    ("time", "f8", "s", "compressed allreduce with error feedback, max over ranks"),
    ("dense_time", "f8", "s", "dense ring allreduce on the same link"),
    ("speedup", "f8", "1", "dense_time / time"),
    ("wire_bytes", "i8", "B", "bytes rank 0 sent per compressed allreduce"),
    ("dense_wire_bytes", "i8", "B", "bytes rank 0 sent per dense allreduce"),
    ("cpu", "f8", "s", "thread CPU seconds per step, mean over ranks"),
    ("encode", "f8", "s", "wall of error feedback + compress, max over ranks"),
    ("encode_cpu", "f8", "s", "CPU of error feedback + compress, max over ranks"),
    ("decode", "f8", "s", "wall of turning payloads into the result, max over ranks"),
    ("decode_cpu", "f8", "s", "CPU of the decode phase, max over ranks"),
    ("wire", "f8", "s", "modelled busy time of a rank's link, max over ranks"),
    ("dense_cpu", "f8", "s", "thread CPU seconds of the dense step, mean over ranks")]
CONVERGENCE_COLUMNS = [
    ("compressor", "str", "1", ""), ("final_loss", "f8", "1", "train cross-entropy"),
    ("test_accuracy", "f8", "1", ""), ("accuracy_drop", "f8", "1", "dense minus this"),
    ("wire_bytes", "i8", "B", "bytes rank 0 sent during training"),
    ("lr_scale", "f8", "1", "multiplier of SGD's learning rate (compressor.lr_scale)")]


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
    from hpcbench.compress.registry import REGISTRY

    return REGISTRY.check(text)


def _positive_mb(text):
    from hpcbench.runtime.config import parse_finite

    v = parse_finite(text)
    if not v > 0:
        raise ValueError(f"size must be > 0 MB, got {text!r}")
    return v


#: float32 copies of the largest gradient a rank holds at once in the allreduce phase: two inputs,
#: the error-feedback residual, the compensated gradient, the output and the dense ring's result
_COPIES = 6


def _link(text):
    from hpcbench.collectives.linkmodel import parse_rate

    parse_rate(text)
    return text


def _output(text):
    if text not in ("dense", "sparse"):
        raise ValueError(f"output must be dense or sparse, got {text!r}")
    return text


class CompressJob(Job):
    """``hpcbench compress``: compressed allreduce on modelled links (see the module docstring)."""

    prog = "hpcbench compress"
    kind = COMPRESS.kind
    description = "Benchmark of gradient compression: local cost, selection quality, allreduce on modelled links."

    def add_arguments(self, p: argparse.ArgumentParser) -> None:
        from hpcbench.compress import names

        p.add_argument("--compressors", type=_csv(_compressor_name), default=["none", "topk", "thresholdv"],
                       help=f"comma list from: {', '.join(names())}")
        p.add_argument("--sizes-mb", type=_csv(_positive_mb), default=[4.0],
                       help="gradient sizes in MB of float32 (comma list)")
        p.add_argument("--ratio", type=float, default=0.01, help="fraction of elements KEPT, (0, 1]")
        p.add_argument("--link", type=_csv(_link), default=["1Gbit"],
                       help="modelled bandwidths, e.g. 100Mbit,1Gbit,10Gbit")
        p.add_argument("--alpha", type=float, default=5e-5, help="per-message latency in seconds")
        p.add_argument("--trace", default=None,
                       help="MobiPerf JSON trace file: replay its bandwidth instead of --link")
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
        p.add_argument("--out", "--output", dest="out", default="results/compress-{start}.h5",
                       help="HDF5 output file, may use {start} (default results/compress-{start}.h5)")

    def configure(self, a: argparse.Namespace) -> None:
        if not 0 < a.ratio <= 1:
            raise InputError(f"--ratio (fraction kept) must be in (0, 1], got {a.ratio}")
        if a.alpha < 0:
            raise InputError(f"--alpha must be >= 0, got {a.alpha}")
        if a.repeats < 1 or a.warmup < 0 or a.steps < 1:
            raise InputError("--repeats and --steps must be >= 1, --warmup >= 0")
        if a.trace_scale <= 0:
            raise InputError("--trace-scale must be > 0")
        if a.threads < 1:
            raise InputError(f"--threads must be >= 1, got {a.threads}")
        cores = os.cpu_count() or 1
        if a.threads > cores:
            raise InputError(f"--threads {a.threads}: more than this node's {cores} cores (torch intra-op threads "
                             f"per rank); give at most {cores}")
        small = [mb for mb in a.sizes_mb if int(mb * 1e6 / 4) < 1]
        if small:
            raise InputError(f"--sizes-mb {small[0]:g}: less than one float32 element (4 bytes = 4e-06 MB); "
                             f"give sizes of at least 4e-06 MB")
        self._check_run_time(a)
        self.trace = None
        if a.trace:
            from hpcbench.collectives.linkmodel import BandwidthReplay
            try:
                self.trace = BandwidthReplay.from_mobiperf(a.trace, a.trace_index, scale=a.trace_scale)
            except (OSError, ValueError) as exc:
                raise InputError(f"--trace: {exc}") from None
        self.cfg = a

    def _check_run_time(self, a: argparse.Namespace) -> None:
        """Refuse settings whose timed calls alone exceed :data:`~hpcbench.runtime.budget.MAX_RUN_S`.

        Per size: every compressor's ``--warmup + --repeats`` local calls
        (and torch.topk's), then per link the dense ring's and each compressor
        and output form's allreduce; ``--convergence`` trains ``--steps`` per compressor.
        """
        from hpcbench.runtime.budget import call_floor_s, check_run_time

        per_size = len(a.compressors) + 1
        if not a.no_allreduce:
            per_size += len(a.link) * (1 + len(a.compressors) * len(a.outputs))
        calls = (a.warmup + a.repeats) * per_size
        least = sum(calls * call_floor_s(4 * int(mb * 1e6 / 4)) for mb in a.sizes_mb)
        if a.convergence:
            least += (len(a.compressors) + 1) * a.steps * call_floor_s(0)
        check_run_time(least, f"--repeats {a.repeats}, --warmup {a.warmup}, --steps {a.steps} over "
                              f"{len(a.sizes_mb)} sizes x {len(a.compressors)} compressors x {len(a.link)} links")

    def memory_need(self):
        """``6 x max(--sizes-mb)`` per rank (:data:`_COPIES` float32 gradients of the largest size)."""
        from hpcbench.runtime.memory import MemoryNeed

        biggest = max(self.cfg.sizes_mb)
        return MemoryNeed(int(_COPIES * biggest * 1e6), f"--sizes-mb {biggest:g}")

    def prepare(self) -> None:
        import torch

        torch.set_num_threads(self.cfg.threads)

    def output(self):
        return self.cfg.out, {}

    def config_record(self):
        return job_arguments(self.cfg)

    def run(self, rf) -> int:
        from hpcbench.results import Column

        a, comm = self.cfg, self.comm
        rank = comm.rank
        links = ["trace"] if self.trace else a.link
        tables = {}
        if rank == 0:
            tables["local"] = rf.table("local", [Column(*c) for c in LOCAL_COLUMNS],
                                       "rank 0 alone, median over repeats after warmup")
            tables["allreduce"] = rf.table("allreduce", [Column(*c) for c in ALLREDUCE_COLUMNS],
                                           f"world size {comm.size}, median over repeats")
            print(f"# hpcbench compress: {comm.size} ranks on {os.cpu_count()} cores, "
                  f"{a.threads} thread(s) each, ratio kept {a.ratio}, links {links}")
            print(f"{'compressor':<15}{'MB':>8}{'comp ms':>10}{'dec ms':>9}{'GB/s':>8}{'wire':>9}"
                  f"{'recall':>8}{'vs topk':>9}")
        step = 0
        for mb in a.sizes_mb:
            step += 1
            fault_point(step)
            self._local(mb, tables.get("local"))
        if not a.no_allreduce:
            if rank == 0:
                print(f"\n{'compressor':<15}{'output':>7}{'MB':>8}{'link':>9}{'time s':>9}{'dense s':>9}"
                      f"{'speedup':>8} |{'cpu ms':>8}{'enc ms':>8}{'enc cpu':>8}{'dec ms':>8}{'dec cpu':>8}"
                      f"{'wire ms':>8}{'wire MB':>8}")
            from hpcbench.collectives.linkmodel import LinkTransport

            for link in links:
                tr = LinkTransport(comm, alpha=a.alpha, beta=link if not self.trace else 1.0,
                                   trace=self.trace)
                try:
                    for mb in a.sizes_mb:
                        step += 1
                        fault_point(step)
                        self._allreduce(mb, link, tr, tables.get("allreduce"))
                finally:
                    tr.free()
        if a.convergence:
            step += 1
            fault_point(step)
            self._convergence(rf)
        if rank == 0:
            print(f"\nwrote {rf.path}")
        return 0

    def _local(self, mb: float, table) -> None:
        """Rank 0 measures every compressor at ``mb`` alone; the others sleep in a barrier."""
        from hpcbench.bench.compress.measure import local, torch_topk_s
        from hpcbench.runtime.wait import sleep_barrier

        a, comm = self.cfg, self.comm
        n = int(mb * 1e6 / 4)
        if comm.rank == 0:
            ref = torch_topk_s(n, a)
            print(f"{'(torch.topk)':<15}{mb:>8.2f}{1e3 * ref:>10.2f}{'-':>9}{4 * n / ref / 1e9:>8.2f}"
                  f"{'-':>9}{1.0:>8.3f}{1.0:>9.2f}", flush=True)
        for name in a.compressors:
            if comm.rank == 0:
                r = local(name, n, a)
                if r:
                    vs = ref / r["compress_s"] if r["compress_s"] > 0 else math.inf
                    table.append({"compressor": name, "size_bytes": 4 * n, "ratio": a.ratio,
                                  "compress_s": r["compress_s"], "decompress_s": r["decompress_s"],
                                  "throughput": r["throughput_GBps"], "wire_ratio": r["wire_ratio"],
                                  "recall": r["recall"], "vs_torch_topk": vs})
                    print(f"{name:<15}{mb:>8.2f}{1e3 * r['compress_s']:>10.2f}{1e3 * r['decompress_s']:>9.2f}"
                          f"{r['throughput_GBps']:>8.2f}{r['wire_ratio']:>9.4f}{fmt(r['recall'], '.3f'):>8}"
                          f"{vs:>9.2f}", flush=True)
            sleep_barrier(comm)

    def _allreduce(self, mb: float, link: str, tr, table) -> None:
        """Dense ring then every compressor (and output form) at ``mb`` on ``tr``, side by side."""
        import torch

        from hpcbench.bench.compress.measure import breakdown, gradient, make, timed_steps
        from hpcbench.collectives.compressed import communicator_for, compressed_allreduce, dense_allreduce
        from hpcbench.compress import ErrorFeedback

        a, comm = self.cfg, self.comm
        rank = comm.rank
        n = int(mb * 1e6 / 4)
        x = gradient(n, 0, rank, a.seed)
        b0 = tr.bytes_sent
        dense = timed_steps(comm, lambda s, prof: dense_allreduce(x, transport=tr), a, tr)
        dense_bytes = (tr.bytes_sent - b0) // (a.warmup + a.repeats)
        if rank == 0:
            print(f"{'(dense ring)':<15}{'dense':>7}{mb:>8.2f}{link:>9}{dense['time']:>9.4f}"
                  f"{dense['time']:>9.4f}{1.0:>8.2f} |{breakdown(dense)}{dense_bytes / 1e6:>8.2f}",
                  flush=True)
        out = torch.empty(n)
        for name in a.compressors:
            for form in a.outputs:
                c, mem = make(name, a.ratio, rank), ErrorFeedback()
                if form == "sparse" and not communicator_for(c).sparse_output:
                    continue
                xs = [gradient(n, s, rank, a.seed) for s in range(2)]
                b0 = tr.bytes_sent
                r = timed_steps(comm, lambda s, prof: compressed_allreduce(
                    xs[s % 2], "g", c, mem, transport=tr, out=out if form == "dense" else None,
                    output=form, profile=prof), a, tr)
                wire = (tr.bytes_sent - b0) // (a.warmup + a.repeats)
                if rank == 0:
                    t = r["time"]
                    table.append({"compressor": name, "size_bytes": 4 * n, "link": link,
                                  "alpha": a.alpha, "output": form, "time": t,
                                  "dense_time": dense["time"], "speedup": dense["time"] / t,
                                  "wire_bytes": wire, "dense_wire_bytes": dense_bytes,
                                  "cpu": r["cpu"], "encode": r["encode"],
                                  "encode_cpu": r["encode_cpu"], "decode": r["decode"],
                                  "decode_cpu": r["decode_cpu"], "wire": r["wire"],
                                  "dense_cpu": dense["cpu"]})
                    print(f"{name:<15}{form:>7}{mb:>8.2f}{link:>9}{t:>9.4f}{dense['time']:>9.4f}"
                          f"{dense['time'] / t:>8.2f} |{breakdown(r)}{wire / 1e6:>8.2f}", flush=True)

    def _convergence(self, rf) -> None:
        """``--convergence``: train the digits MLP once per compressor (collective)."""
        from hpcbench.bench.compress.convergence import train
        from hpcbench.results import Column

        a, comm = self.cfg, self.comm
        rows = [train(name, comm, steps=a.steps, seed=a.seed) for name in a.compressors]
        if comm.rank != 0:
            return
        dense_acc = next((r["test_accuracy"] for r in rows if r["compressor"] == "none"), float("nan"))
        table = rf.table("convergence", [Column(*c) for c in CONVERGENCE_COLUMNS],
                         f"digits MLP, {a.steps} steps, error feedback")
        print(f"\n{'compressor':<15}{'loss':>9}{'test acc':>10}{'drop pts':>10}{'lr x':>7}")
        for r in rows:
            table.append({"compressor": r["compressor"], "final_loss": r["final_loss"],
                          "test_accuracy": r["test_accuracy"],
                          "accuracy_drop": dense_acc - r["test_accuracy"], "wire_bytes": r["wire_bytes"],
                          "lr_scale": r["lr_scale"]})
            print(f"{r['compressor']:<15}{r['final_loss']:>9.4f}{r['test_accuracy']:>10.4f}"
                  f"{100 * (dense_acc - r['test_accuracy']):>10.2f}{r['lr_scale']:>7.3g}")

"""The collective benchmark as a lifecycle job: flags, checks, set-up, the sweep."""

from __future__ import annotations

import argparse
import re

import numpy as np

from hpcbench.bench.collectives.backends import BASELINES, OPS, REDOPS, Custom, custom_algorithms, make_buffers
from hpcbench.bench.collectives.declaration import COLLECTIVES
from hpcbench.bench.collectives.reference import DTYPES, ITEMSIZE, count_wrong, reference
from hpcbench.lifecycle import Job, job_arguments
from hpcbench.runtime.errors import InputError
from hpcbench.runtime.faults import fault_point

__all__ = ["CollectivesJob", "parse_size"]


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


class CollectivesJob(Job):
    """``hpcbench collectives``: custom collective algorithms against MPI, gloo and Horovod.

    Every rank runs every implementation on every size; rank 0 prints the
    table and writes the ``results`` table (``--overlap``: the ``overlap``
    table of :mod:`hpcbench.bench.collectives.overlap`). Exit status 1 when
    any element was wrong.
    """

    prog = "hpcbench collectives"
    kind = COLLECTIVES.kind
    description = "Collective algorithms against MPI, gloo and Horovod."

    def add_arguments(self, p: argparse.ArgumentParser) -> None:
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
                       help="comma list of implementations: custom algorithm names, "
                            f"{', '.join(BASELINES)} (default: all)")
        p.add_argument("-w", "--warmup", type=_positive_int, default=5,
                       help="warm-up iterations at the smallest size (shrinks with size)")
        p.add_argument("-n", "--iters", type=_positive_int, default=50,
                       help="timed iterations at the smallest size (shrinks with size, >= 5)")
        p.add_argument("--rounds", type=_positive_int, default=5,
                       help="interleaved rounds per size: the implementations take turns in a "
                            "Williams design, each round timing its share of the iterations "
                            "(p50 and mean over all of them); 1: one block per implementation, "
                            "as nccl-tests and OSU run (default 5)")
        p.add_argument("--nonblocking", action="store_true",
                       help="run the custom algorithms as their nonblocking form followed by "
                            "wait() (iallreduce(...).wait()); baselines stay blocking")
        p.add_argument("--overlap", action="store_true",
                       help="measure the share of iallreduce time hidden behind matmuls "
                            "(hpcbench.bench.collectives.overlap)")
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
        p.add_argument("--link-scope", choices=("all", "between_hosts"), default="all",
                       help="--link: model every message (all), or only messages between ranks on different "
                            "hosts, those inside a host going through shared memory as they are (between_hosts)")
        p.add_argument("--device", choices=("cpu", "cuda", "auto"), default="cpu",
                       help="where the buffers live: cpu, or cuda (one GPU per rank by node-local rank; "
                            "allreduce only: nccl, gloo, mpi_direct on device memory, mpi and hpcbench's "
                            "algorithms host-staged; exit 2 without a GPU); auto: cuda where a GPU is visible")
        p.add_argument("--seed", type=int, default=0)
        p.add_argument("--output", default=None,
                       help="HDF5 result file, may use {op} and {start} (default "
                            "results/collectives-{op}-{start}.h5; --overlap: "
                            "results/collectives-overlap-{start}.h5)")

    def configure(self, args: argparse.Namespace) -> None:
        if args.stepfactor < 2:
            raise InputError(f"-f/--stepfactor: must be >= 2, got {args.stepfactor}")
        if args.link is not None:
            from hpcbench.collectives.linkmodel import parse_rate
            try:
                args.link_bps = parse_rate(args.link)
            except ValueError as exc:
                raise InputError(f"--link: {exc}") from None
        else:
            args.link_bps = None
        if not (args.link_alpha >= 0 and args.link_alpha == args.link_alpha
                and args.link_alpha != float("inf")):
            raise InputError(f"--link-alpha: must be a finite latency >= 0 s, got {args.link_alpha}")
        if not (0 < args.overlap_factor < 100):
            raise InputError(f"--overlap-factor: must be in (0, 100), got {args.overlap_factor}")
        if args.minbytes > args.maxbytes:
            raise InputError(f"-b/--minbytes: {args.minbytes} exceeds -e/--maxbytes {args.maxbytes}")
        if args.device != "cpu":
            bad = [(k, v) for k, v in (("-o/--op", args.op if args.op != "allreduce" else None),
                                       ("--overlap", args.overlap or None), ("--link", args.link)) if v]
            if bad:
                raise InputError(f"{bad[0][0]}: {bad[0][1]!r} is not available with --device {args.device} (GPU "
                                 f"buffers: allreduce, without --overlap and --link)")
        allowed = custom_algorithms(args.op) + list(self._baselines(args.device))
        if args.algorithms:
            impls = [a.strip() for a in args.algorithms.split(",") if a.strip()]
            bad = [a for a in impls if a not in allowed]
            if bad or not impls:
                raise InputError(f"-a/--algorithms: unknown {bad or args.algorithms!r}; "
                                 f"choose from {', '.join(allowed)}")
        else:
            impls = allowed
        if "mpi" in impls:        # MPI is the reference for the ratio column: run it first
            impls = ["mpi"] + [a for a in impls if a != "mpi"]
        args.impls = impls
        self._check_run_time(args)
        self.cfg = args

    @staticmethod
    def _check_run_time(a: argparse.Namespace) -> None:
        """Refuse a sweep whose calls alone (each at least :func:`~hpcbench.runtime.budget.call_floor_s`) exceed
        :data:`~hpcbench.runtime.budget.MAX_RUN_S`."""
        from hpcbench.bench.collectives.report import iters_for, sizes
        from hpcbench.runtime.budget import call_floor_s, check_run_time

        rows = sizes(a.minbytes, a.maxbytes, a.stepfactor)
        if a.overlap:
            least = len(rows) * 3 * a.overlap_reps * call_floor_s(a.maxbytes)
        else:
            least = len(a.impls) * sum((sum(iters_for(n, a.iters, a.warmup)) + min(a.rounds, a.iters))
                                       * call_floor_s(n) for n in rows)
        check_run_time(least, f"-n/--iters {a.iters}, -w/--warmup {a.warmup}, --rounds {a.rounds}, "
                              f"--overlap-reps {a.overlap_reps} over {len(rows)} sizes (-b {a.minbytes} to "
                              f"-e {a.maxbytes}) x {len(a.impls)} implementations")

    @staticmethod
    def _baselines(device: str) -> dict:
        if device == "cpu":
            return BASELINES
        from hpcbench.bench.collectives.gpu import GPU_BASELINES

        return GPU_BASELINES

    def memory_need(self):
        """Buffers of ``-e/--maxbytes`` per rank: an input and an output per kind of buffers (numpy,
        torch: the implementations of one kind share them, :meth:`_interleaved`), the reference
        result and the algorithm's scratch, and the float64 call times of ``-n/--iters`` per
        implementation (a lower bound; the float64 pattern the inputs are made from is left out)."""
        from hpcbench.runtime.memory import MemoryNeed

        a = self.cfg
        baselines = self._baselines(a.device)
        kinds = len({baselines[i].torch_buffers if i in baselines else Custom.torch_buffers for i in a.impls})
        times = 3 * 8 * a.iters * len(a.impls)   # per implementation: float64 seconds, their parts and the gather
        return MemoryNeed((2 * kinds + 2) * a.maxbytes + times,
                          f"-e/--maxbytes {a.maxbytes} (-b/--minbytes {a.minbytes}, --op {a.op}), -n/--iters {a.iters}")

    def prepare(self) -> None:
        """Choose the device, start the baselines (gloo, Horovod, NCCL) and the ``--link`` transport (collective).

        Raises
        ------
        InputError
            ``--device cuda`` without a visible GPU.
        """
        from hpcbench.runtime.device import select_device

        a, comm = self.cfg, self.comm
        self.device = select_device(comm, a.device, "--device")
        self.notes: list[str] = []
        self.backends = {}
        self.link = None
        if a.link_bps is not None:
            from hpcbench.collectives.linkmodel import LinkTransport
            self.link = LinkTransport(comm, alpha=a.link_alpha, beta=a.link_bps, scope=a.link_scope)
        if a.overlap:
            return
        baselines = self._baselines("cuda" if self.device.is_cuda else "cpu")
        if a.device == "auto" and not self.device.is_cuda:     # no GPU: the CPU sweep, without GPU-only rows
            a.impls = [i for i in a.impls if i in BASELINES or i in custom_algorithms(a.op)]
        for impl in a.impls:
            backend = baselines[impl]() if impl in baselines else Custom(impl, self.link, a.nonblocking)
            note = backend.start(comm, a.dtype)
            if note:
                self.notes.append(note)
            else:
                self.backends[impl] = backend
        if self.link is not None:
            used = ", ".join(i for i in self.backends if i in BASELINES) or "no baseline"
            self.notes.append(f"link: custom algorithms over {self.link_text()}; {used} "
                              f"not modelled (vs_mpi compares modelled to real)")

    def link_text(self) -> str:
        a = self.cfg
        if a.link_bps is None:
            return "none (shared-memory MPI)"
        scope = " between hosts" if a.link_scope == "between_hosts" else ""
        return f"modelled {a.link_bps / 1e9:g} Gbit/s{scope}, alpha={a.link_alpha:g} s"

    def output(self):
        a = self.cfg
        default = ("results/collectives-overlap-{start}.h5" if a.overlap
                   else "results/collectives-{op}-{start}.h5")
        return a.output or default, {"op": a.op}

    def provenance(self) -> dict:
        from hpcbench.runtime.gpuinfo import gpu_provenance

        return gpu_provenance(self.device)

    def config_record(self):
        config = {k: v for k, v in job_arguments(self.cfg).items() if k not in ("impls", "link_bps")}
        if not self.cfg.overlap:
            config["impls"] = list(self.backends)
        return config

    def run(self, results) -> int:
        try:
            if self.cfg.overlap:
                from hpcbench.bench.collectives.overlap import run_overlap
                from hpcbench.bench.collectives.report import sizes

                a = self.cfg
                return run_overlap(a, self.comm, sizes(max(a.minbytes, 4096), a.maxbytes, a.stepfactor),
                                   self.link, self.link_text(), _progress(), results)
            return self._sweep(results)
        finally:
            self.release()

    def release(self) -> None:
        """Stop the baselines (Horovod's thread calls MPI) and free the link transport (collective)."""
        for backend in self.backends.values():
            backend.stop()
        self.backends = {}
        if self.link is not None:
            self.link.free()
            self.link = None

    def _sweep(self, rf) -> int:
        from hpcbench.bench.collectives.report import COLUMNS, busbw_factor, header, iters_for, row_text, sizes
        from hpcbench.results import Column
        from hpcbench.runtime.hosts import gather_hostnames

        a, comm = self.cfg, self.comm
        n, rank = comm.size, comm.rank
        say = print if rank == 0 else (lambda *x, **k: None)
        nhosts = len(set(gather_hostnames(comm)))
        for line in self.notes:
            say(line)
        table = None
        if rank == 0:
            table = rf.table("results", [Column(*c) for c in COLUMNS],
                             "one row per message size per implementation")
        itemsize = ITEMSIZE[a.dtype]
        fac = busbw_factor(a.op, n)
        for line in header(a, n, nhosts, _progress(), self.link_text()):
            say(line)
        busbw = {i: [] for i in self.backends}
        total_wrong = 0
        for step, size in enumerate(sizes(a.minbytes, a.maxbytes, a.stepfactor), start=1):
            fault_point(step)
            count = size // itemsize
            if a.op in ("reduce_scatter", "allgather"):
                count -= count % n
            nbytes = count * itemsize
            iters, warm = iters_for(nbytes, a.iters, a.warmup)
            times = self._interleaved(count, iters, warm)
            mpi_time = float("nan")
            for impl, backend in self.backends.items():
                t = times[impl] * 1e6
                # correctness on fresh inputs
                b = self._buffers(count, backend)
                self._runner(impl, backend, b)()
                res = b.x if a.op == "bcast" else b.out
                ref = reference(n, count, a.redop, a.dtype, a.op, rank)
                wrong = comm.allreduce(count_wrong(res, ref, a.dtype))
                total_wrong += wrong
                mean = float(t.mean())
                algbw = nbytes / (mean * 1e3) if mean > 0 else 0.0
                bus = algbw * fac
                busbw[impl].append(bus)
                if impl == "mpi":
                    mpi_time = mean
                ratio = mean / mpi_time if mpi_time == mpi_time else float("nan")
                p50, p99 = np.percentile(t, [50, 99])
                row = {"size": nbytes, "count": count, "type": a.dtype, "redop": a.redop,
                       "impl": impl, "time": mean, "p50": p50, "p99": p99, "algbw": algbw,
                       "busbw": bus, "vs_mpi": ratio, "wrong": wrong}
                say(row_text(row))
                if rank == 0:
                    table.append(row)
        for impl, values in busbw.items():
            if values:
                say(f"# Avg bus bandwidth {impl:>18}: {np.mean(values):.3f} GB/s")
        status = "OK" if total_wrong == 0 else "FAILED"
        say(f"# Check: {status} ({total_wrong} wrong elements)")
        if rank == 0:
            rf.set_attrs(check=status, wrong_elements=total_wrong, notes="\n".join(self.notes))
            say(f"# results: {rf.path}")
        return 0 if total_wrong == 0 else 1

    def _interleaved(self, count: int, iters: int, warm: int) -> dict[str, np.ndarray]:
        """Seconds of ``iters`` timed calls of every backend at ``count`` elements, taken in rounds.

        The ``iters`` calls are split into ``min(--rounds, iters)`` rounds; in
        each round every backend times its share in one block
        (:func:`~hpcbench.runtime.timing.iteration_times`), the backends in
        the round's order of a Williams design
        (:func:`~hpcbench.runtime.interleave.balanced_orders`): a slow spell
        of the machine (another process, the scheduler putting both ranks on
        one core) falls on every backend alike instead of on one block, and
        the p50 stays the typical call's as long as it spans fewer than half
        the rounds. Each backend's ``warm`` untimed calls run before its first
        round, and every round begins with one untimed call after the
        sleeping line-up. Backends with the same kind of buffers (numpy or
        torch) share one pair, so each round finds the same pages.

        Returns
        -------
        dict of str to numpy.ndarray
            Per backend name, float64 seconds of shape (iters,), the slowest
            rank's per call (collective).
        """
        from hpcbench.runtime.interleave import balanced_orders
        from hpcbench.runtime.timing import iteration_times

        names = list(self.backends)
        if not names:           # every implementation skipped (its note printed): nothing to time
            return {}
        shared: dict[bool, object] = {}
        runners = {}
        for impl in names:
            backend = self.backends[impl]
            if backend.torch_buffers not in shared:
                shared[backend.torch_buffers] = self._buffers(count, backend)
            runners[impl] = self._runner(impl, backend, shared[backend.torch_buffers])
        rounds = min(self.cfg.rounds, iters)
        share = [iters // rounds + (r < iters % rounds) for r in range(rounds)]
        orders = balanced_orders(len(names))
        parts: dict[str, list[np.ndarray]] = {i: [] for i in names}
        for r in range(rounds):
            for j in orders[r % len(orders)]:
                impl = names[j]
                parts[impl].append(iteration_times(self.comm, runners[impl], share[r], warm if r == 0 else 0))
        return {i: np.concatenate(p) for i, p in parts.items()}

    def _buffers(self, count: int, backend):
        """Fresh buffers of one row (on the GPU with ``--device cuda``)."""
        a = self.cfg
        b = make_buffers(a.op, a.dtype, a.redop, count, self.comm, backend.torch_buffers)
        if not self.device.is_cuda:
            return b
        from hpcbench.bench.collectives.gpu import to_device

        return to_device(b, self.device.torch)

    def _runner(self, impl: str, backend, b):
        """One call of ``impl`` on ``b``; on a GPU host-staged unless it takes device memory, and synchronised."""
        if not self.device.is_cuda:
            return backend.runner(self.cfg.op, b, self.comm)
        from hpcbench.bench.collectives.gpu import DEVICE_NATIVE, staged_runner, synchronised

        if impl in DEVICE_NATIVE:
            return synchronised(backend.runner(self.cfg.op, b, self.comm))
        return synchronised(staged_runner(backend, self.cfg.op, b, self.comm))


def _progress() -> str:
    from hpcbench.collectives.progress import progress_mode
    return progress_mode()

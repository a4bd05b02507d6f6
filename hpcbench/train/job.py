"""``python -m hpcbench.train``: data-parallel SGD on MPI ranks, synchronisers side by side."""

from __future__ import annotations

import math
import sys

import numpy as np

from hpcbench.runtime.errors import InputError
from hpcbench.runtime.lifecycle import Job, agree

__all__ = ["TrainJob"]


def _gather(comm, vec: np.ndarray):
    """Rank 0 gets every rank's ``vec`` as rows ``(p, k)`` (sleeping while it waits); others None."""
    from mpi4py import MPI

    from hpcbench.runtime.wait import sleep_wait

    out = np.empty((comm.size, vec.size)) if comm.rank == 0 else None
    sleep_wait(comm.Igather([vec, MPI.DOUBLE], [out, MPI.DOUBLE] if out is not None else None, root=0))
    return out


class TrainJob(Job):
    """Data-parallel training (KungFu's synthetic benchmark, or the digits) under the shared lifecycle."""

    prog = "hpcbench train"
    kind = "train"
    description = ("Data-parallel SGD on MPI ranks (one worker per rank): torchvision ResNet-18/50,\n"
                   "MobileNetV2, VGG16 on KungFu's synthetic images, or the digits; gradients synchronised\n"
                   "by each configured synchroniser in turn (hpcbench's allreduces with bucket overlap, MPI,\n"
                   "DDP, Horovod, compressed, SMA, pair averaging); real or emulated compute over modelled\n"
                   "links with time dilation; writes HDF5.")
    epilog = "Every config key can be overridden: --sync '[ring, ddp]' --image_size 64 --link.kind model"

    def add_arguments(self, parser) -> None:
        from hpcbench.runtime.config import add_config_arguments
        from hpcbench.train.config import TrainConfig

        add_config_arguments(parser, TrainConfig)   # --help lists every key with its default and meaning

    def configure(self, args) -> None:
        from hpcbench.runtime.config import config_overrides
        from hpcbench.train.config import load_config
        from hpcbench.train.models import MODELS

        overrides = config_overrides(args)
        self.cfg = cfg = load_config(args.config, overrides)
        if MODELS[cfg.model].task == "digits" and cfg.batch_size * self.comm.size > 1347:
            raise InputError(f"batch_size: {cfg.batch_size} x {self.comm.size} workers exceeds the 1347 training "
                             f"digits")

    def _trains(self) -> bool:
        """Whether this rank runs the model: real compute, digits, or rank 0 profiling it."""
        from hpcbench.train.models import MODELS

        cfg = self.cfg
        return (cfg.compute == "real" or (self.comm.rank == 0 and cfg.profile_file is None)
                or MODELS[cfg.model].task != "synthetic")

    def memory_need(self):
        from hpcbench.train.memory import memory_need

        return memory_need(self.cfg, self._trains())

    # -- prepare -------------------------------------------------------------------------------------
    def prepare(self) -> None:
        from hpcbench.runtime.dilation import TimeDilation
        from hpcbench.runtime.heap import trim_heap
        from hpcbench.runtime.wait import sleep_bcast
        from hpcbench.train.buckets import BucketPlan
        from hpcbench.train.models import MODELS
        from hpcbench.train.priority import bucket_need_times

        cfg, comm = self.cfg, self.comm
        self.dilation = TimeDilation(cfg.time_dilation)
        self.sync_comm = comm.Dup()
        self.transport = self._transport()
        self.task = MODELS[cfg.model].task
        self.data = None
        # emulated: only rank 0 runs the model (to profile it); the other ranks never import torch
        # (about 150 MB of private memory per process: 64 ranks would need 10 GB for it alone)
        if self._trains():
            import torch

            from hpcbench.train.data import build_data

            torch.set_num_threads(1)
            self.data = build_data(self.task, cfg.batch_size, cfg.image_size, cfg.seed, comm)
        prof, error = None, None
        if comm.rank == 0 and cfg.profile_file is not None:
            from hpcbench.train.profile import load_profile

            try:
                prof = load_profile(cfg.profile_file, cfg.model)
            except (OSError, KeyError, ValueError) as exc:
                error = f"profile_file: {cfg.profile_file!r}: {exc}"
        elif comm.rank == 0:
            try:
                prof = self._profile()
            except (ImportError, RuntimeError) as exc:
                error = f"model: {cfg.model!r} cannot be built here ({type(exc).__name__}: {exc})"
            trim_heap()     # the profiled model's freed activations and gradients (about 250 MB)
        prof, error = sleep_bcast(comm, (prof, error))
        if error:
            raise InputError(error)
        if cfg.compute_time_s is not None:
            prof = prof.scaled_to(cfg.compute_time_s)
        self.profile = prof
        self.plan = BucketPlan(prof.numels, self.bucket_bytes)
        self.bucket_need_s = bucket_need_times(self.plan, prof.need_times())   # the priority schedule's key

    #: link of the priority order's cost estimate where the link is not modelled (shared memory, or a
    #: time-varying trace): only the costs' ratios to each other and to the backward matter to the order
    NOMINAL_ALPHA_S, NOMINAL_BITS_PER_S = 5e-6, 10e9

    def bucket_order(self, sync, schedule: str):
        """Under ``schedule`` ``"priority"``, synchroniser ``sync``'s bucket start order (the same on every rank,
        from the broadcast profile and the algorithm's cost model over the link); None under FIFO or for a
        synchroniser that does not average gradients."""
        if schedule != "priority" or sync.averages != "gradients":
            return None
        from hpcbench.collectives.cost import link_beta
        from hpcbench.train.predict import message_time
        from hpcbench.train.priority import priority_order

        alpha, beta = self.alpha, self.beta
        if not (math.isfinite(alpha) and math.isfinite(beta)):
            alpha, beta = self.NOMINAL_ALPHA_S, link_beta(self.NOMINAL_BITS_PER_S)
        cost = [message_time(sync.cost_model or "ring", int(nb), self.comm.size, alpha, beta)
                for nb in self.plan.nbytes]
        return priority_order(self.plan.ready_times(self.profile.param_ready_s), cost, self.bucket_need_s)

    @property
    def bucket_bytes(self) -> int:
        """Bucket capacity in bytes (``bucket_mb`` MiB, as DDP's ``bucket_cap_mb``)."""
        return int(self.cfg.bucket_mb * 2**20)

    def _profile(self):
        from hpcbench.train.models import build_model
        from hpcbench.train.profile import profile_compute

        return profile_compute(build_model(self.cfg.model, self.cfg.seed), self.data, self.cfg.profile_steps,
                               self.cfg.lr)

    def _transport(self):
        from hpcbench.collectives.transport import Transport

        link = self.cfg.link
        if link.kind != "model":
            self.alpha, self.beta = math.nan, math.nan
            return Transport(self.sync_comm)
        from hpcbench.collectives.cost import link_beta
        from hpcbench.collectives.linkmodel import BandwidthReplay, LinkTransport, parse_rate

        trace = None
        self.alpha, self.beta = link.latency_s, link_beta(parse_rate(link.bandwidth))
        if link.trace_index is not None:
            try:
                trace = BandwidthReplay.from_mobiperf(index=link.trace_index, interval_s=link.trace_interval_s,
                                                      scale=link.trace_scale)
            except ValueError as exc:
                raise InputError(f"link.trace_index: {link.trace_index}: {exc}") from None
            self.beta = math.nan   # time-varying: no single alpha-beta prediction
        return LinkTransport(self.sync_comm, link.latency_s, link.bandwidth, trace=trace, dilation=self.dilation)

    # -- output --------------------------------------------------------------------------------------
    def output(self):
        return self.cfg.output, {"job_name": self.cfg.job_name}

    def config_record(self):
        return self.cfg.model_dump()

    def _link_text(self) -> str:
        link = self.cfg.link
        if link.kind != "model":
            return "shared memory (MPI point-to-point, not modelled)"
        rate = (f"MobiPerf trace row {link.trace_index} x {link.trace_scale:g}" if link.trace_index is not None
                else link.bandwidth)
        return f"modelled: latency {link.latency_s * 1e6:g} us, bandwidth {rate}"

    def provenance(self) -> dict:
        cfg, prof = self.cfg, self.profile
        return dict(job_name=cfg.job_name, compute_mode=cfg.compute, time_dilation=cfg.time_dilation,
                    link_model=self._link_text(), workers=self.comm.size, model=cfg.model, task=self.task,
                    parameters=int(sum(prof.numels)), gradient_bytes=int(4 * sum(prof.numels)),
                    buckets=len(self.plan.buckets), bucket_bytes=self.bucket_bytes,
                    compute_time_source=prof.source, profile_file=cfg.profile_file or "",
                    forward_s=prof.forward_s, backward_s=prof.backward_s,
                    optimizer_s=prof.optimizer_s, synchronisers=",".join(cfg.sync), overlap=cfg.overlap,
                    schedule=cfg.schedule)

    def _header(self) -> str:
        cfg, prof, p = self.cfg, self.profile, self.comm.size
        n = sum(prof.numels)
        data = (f"{cfg.image_size}x{cfg.image_size} synthetic images (KungFu)" if self.task == "synthetic"
                else "digits")
        return (f"{self.prog}: {cfg.model} ({n / 1e6:.2f}M parameters, {4 * n / 1e6:.1f} MB of gradients in "
                f"{len(self.plan.buckets)} buckets of <= {cfg.bucket_mb:g} MiB), batch {cfg.batch_size} per "
                f"worker, {data}, {p} workers\n"
                f"compute {cfg.compute} ({prof.source}: forward {prof.forward_s * 1e3:.1f} ms, backward "
                f"{prof.backward_s * 1e3:.1f} ms, optimizer {prof.optimizer_s * 1e3:.1f} ms per step), time "
                f"dilation {cfg.time_dilation:g}, link {self._link_text()}, overlap "
                f"{'on' if cfg.overlap else 'off'}, schedule {cfg.schedule}")

    # -- run -----------------------------------------------------------------------------------------
    def run(self, results) -> int:
        from hpcbench.train.loop import SyncRun
        from hpcbench.train.report import Report
        from hpcbench.train.tables import make_tables

        cfg, comm = self.cfg, self.comm
        monitor_columns = self._monitor_columns()
        report = None
        if comm.rank == 0:
            tables = make_tables(results, monitor_columns)
            tables["buckets"].append(dict(
                bucket=list(range(len(self.plan.buckets))), bytes=[int(b) for b in self.plan.nbytes],
                params=[len(b) for b in self.plan.buckets],
                ready_s=list(self.plan.ready_times(self.profile.param_ready_s)),
                need_s=list(self.bucket_need_s)))
            prof = self.profile
            tables["profile"].append(dict(param=list(range(len(prof.numels))), numel=[int(n) for n in prof.numels],
                                          ready_s=[float(r) for r in prof.param_ready_s],
                                          need_s=[float(r) for r in prof.need_times()]))
            report = Report(self, tables, monitor_columns)
            print(self._header())
            sys.stdout.flush()
        runs = []
        self.steps_done = 0
        try:
            for name, base, schedule in cfg.sync_entries():
                sync, error = self._build_sync(base)
                if error:
                    if report is not None:
                        report.skipped(name, error)
                    continue
                runs.append(SyncRun(self, name, sync, report, schedule))
            if report is not None:
                report.start(sum(r.total_steps() for r in runs))
            self._drive([r.execute() for r in runs], cfg.interleave_sync)
        finally:
            for r in runs:
                r.close()
        if report is not None:
            report.close()
            report.comparison()
        return 0

    @staticmethod
    def _drive(gens: list, interleave: bool) -> None:
        """Run the synchronisers one after the other, or their iterations in turn (round robin)."""
        if not interleave:
            for g in gens:
                for _ in g:
                    pass
            return
        while gens:
            for g in list(gens):
                if next(g, StopIteration) is StopIteration:
                    gens.remove(g)

    def _monitor_columns(self) -> list[str]:
        if not self.cfg.monitors:   # the monitors import torch
            return []
        from hpcbench.monitors import MONITORS

        return [f"{m}_{out}" for m in self.cfg.monitors for out in MONITORS[m].outputs]

    def _build_sync(self, name: str):
        from hpcbench.sync import SyncOptions, Unavailable, build

        cfg = self.cfg
        opts = SyncOptions(algorithm=cfg.algorithm, compressor=cfg.compressor, compress_ratio=cfg.compress_ratio,
                           alpha=cfg.sma_alpha, bucket_bytes=self.bucket_bytes, seed=cfg.seed)
        sync, error = None, None
        try:
            sync = build(name, self.sync_comm, self.transport, opts)
        except Unavailable as exc:
            error = str(exc)
        error = agree(self.comm, error)
        if error and sync is not None:
            sync.close()
        return sync, error

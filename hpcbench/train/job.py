"""``python -m hpcbench.train``: data-parallel SGD on MPI ranks, synchronisers side by side."""

from __future__ import annotations

import math
import sys

from hpcbench.lifecycle import Job
from hpcbench.runtime.agreement import agree
from hpcbench.runtime.errors import InputError
from hpcbench.train.declaration import TRAIN

__all__ = ["TrainJob"]


class TrainJob(Job):
    """Data-parallel training (KungFu's synthetic benchmark, or the digits) under the shared lifecycle."""

    prog = "hpcbench train"
    kind = TRAIN.kind
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
        from hpcbench.train.workloads.models import train_samples

        overrides = config_overrides(args)
        self.cfg = cfg = load_config(args.config, overrides)
        n = train_samples(cfg.model, cfg.dataset.name)
        if cfg.elastic is not None:
            self._check_elastic(cfg.elastic)
        from hpcbench.runtime.bounded import check_input_file

        for key, path in (("profile_file", cfg.profile_file), ("step_clock.profile_file", cfg.step_clock.profile_file)):
            if path is not None:    # a FIFO or a device would block or never end where it is read
                check_input_file(path, key, "results", "HDF5 file")
        for i, e in enumerate(cfg.link.slow):
            if e.rank >= self.comm.size:
                raise InputError(f"key 'link.slow.{i}.rank' has bad value {e.rank}: the job has {self.comm.size} "
                                 f"ranks")
        if n is not None and cfg.batch_size * self.comm.size > n:
            raise InputError(f"batch_size: {cfg.batch_size} x {self.comm.size} workers exceeds the {n} training "
                             f"samples")

    def _check_elastic(self, el) -> None:
        """Worker counts within the ranks started (the warm pool)."""
        p = self.comm.size
        if el.workers is not None and el.workers > p:
            raise InputError(f"key 'elastic.workers' has bad value {el.workers}: more workers than the {p} ranks "
                             f"started (the warm pool)")
        for k, v in (el.schedule or {}).items():
            if v > p:
                raise InputError(f"key 'elastic.schedule.{k}' has bad value {v}: more workers than the {p} ranks "
                                 f"started (the warm pool)")
        if el.batch == "keep_global":   # the starting global batch is split over every later worker count
            start, batch = el.initial(p), self.cfg.batch_size
            most, key = (max(el.schedule.values()), "elastic.schedule") if el.schedule else (p, "elastic.workers")
            if most > batch * start:
                raise InputError(f"key '{key}': {most} workers cannot share keep_global's global batch of "
                                 f"{batch * start} samples (batch_size {batch} x {start} starting workers; every "
                                 f"worker needs one); raise batch_size, or give elastic.batch: keep_local")

    def _trains(self) -> bool:
        """Whether this rank runs the model: real compute, real data, or rank 0 profiling it."""
        cfg = self.cfg
        return (cfg.compute == "real" or (self.comm.rank == 0 and cfg.profile_file is None)
                or cfg.data_name() != "synthetic")

    def memory_need(self):
        from hpcbench.train.memory import memory_need

        return memory_need(self.cfg, self._trains())

    # -- prepare -------------------------------------------------------------------------------------
    def prepare(self) -> None:
        from hpcbench.runtime.device import select_device
        from hpcbench.runtime.dilation import TimeDilation
        from hpcbench.runtime.heap import trim_heap
        from hpcbench.runtime.wait import sleep_bcast
        from hpcbench.train.synchronisation.buckets import BucketPlan
        from hpcbench.train.synchronisation.priority import bucket_need_times

        cfg, comm = self.cfg, self.comm
        self.dilation = TimeDilation(cfg.time_dilation)
        # emulated: only rank 0 runs the model (to profile it, on the configured device); the other ranks never
        # import torch (about 150 MB of private memory per process: 64 ranks would need 10 GB for it alone)
        profiles = comm.rank == 0 and cfg.profile_file is None
        self.device = select_device(comm, cfg.device, "device", needed=cfg.compute == "real" or profiles)
        if self.device.is_cuda and cfg.host_staging is False and cfg.compute == "real":
            raise InputError(f"host_staging: false with device: {cfg.device!r} on a GPU: hpcbench's collectives move "
                             f"host memory only (device buffers need host staging)")
        self.sync_comm = comm.Dup()
        self.transport = self._transport()
        self.task = cfg.data_name()
        self.data = None
        if self._trains():
            import torch

            from hpcbench.train.workloads.data import build_data

            torch.set_num_threads(1)
            self.data = build_data(self.task, cfg.batch_size, cfg.image_size, cfg.seed, comm, self.device.torch,
                                   cfg.dataset)
            n = getattr(self.data, "num_samples", None)
            if n is not None and cfg.batch_size * comm.size > n:
                raise InputError(f"batch_size: {cfg.batch_size} x {comm.size} workers exceeds the {n} training "
                                 f"samples of {self.task}")
        prof, error = None, None
        if comm.rank == 0 and cfg.profile_file is not None:
            from hpcbench.train.steps.profile import load_profile

            try:
                prof = load_profile(cfg.profile_file, cfg.model)
            except (OSError, KeyError, ValueError) as exc:
                error = f"profile_file: {cfg.profile_file!r}: {exc}"
        elif comm.rank == 0:
            try:
                prof = self._profile()
            except (ImportError, RuntimeError) as exc:
                error = f"model: {cfg.model!r} cannot be built here ({type(exc).__name__}: {exc})"
            except InputError as exc:    # a user's model that breaks the contract (docs/byo.md)
                error = str(exc)
            trim_heap()     # the profiled model's freed activations and gradients (about 250 MB)
        prof, error = sleep_bcast(comm, (prof, error))
        if error:
            raise InputError(error)
        if cfg.compute_time_s is not None:
            prof = prof.scaled_to(cfg.compute_time_s)
        self.profile = prof
        self.profile_device = prof.device
        self.plan = BucketPlan(prof.numels, self.bucket_bytes)
        self.clock = self._clock() if cfg.step_clock.kind == "modelled" else None
        self.bucket_need_s = bucket_need_times(self.plan, prof.need_times())   # the priority schedule's key
        self.setup = self._setup()

    def _setup(self):
        """The typed pieces the loop, its hooks and the workers get (never this job)."""
        from hpcbench.train.steps.context import LinkCost, RunSettings, TrainSetup

        cfg = self.cfg
        data = self.data
        epoch = cfg.epoch_size if cfg.epoch_size is not None else getattr(data, "num_samples", None)
        settings = RunSettings(model=cfg.model, model_options=dict(cfg.model_options), seed=cfg.seed, compute=cfg.compute, batch_size=cfg.batch_size,
                               lr=cfg.lr, epoch_size=epoch, warmup=cfg.warmup, iterations=cfg.iterations,
                               batches_per_iter=cfg.batches_per_iter,
                               monitors=tuple(m for m, _ in cfg.monitor_entries()),
                               monitor_interval=cfg.monitor_interval, interleave_monitors=cfg.interleave_monitors,
                               overlap=cfg.overlap, bucket_bytes=self.bucket_bytes, progress=cfg.progress,
                               host_staging=self.host_staging)
        from hpcbench.traces.speed import speed_factors

        speed = float(speed_factors(cfg.speed, self.comm.size, cfg.seed, "speed")[self.comm.rank])
        return TrainSetup(comm=self.comm, sync_comm=self.sync_comm, transport=self.transport, settings=settings,
                          profile=self.profile, plan=self.plan, bucket_need_s=self.bucket_need_s, data=data,
                          dilation=self.dilation, link=LinkCost(self.alpha, self.beta, cfg.link.kind == "model",
                                                                self._modelled_hosts()),
                          transport_on=self._transport_on, device=self.device, speed=speed)

    def _modelled_hosts(self) -> tuple:
        """The ranks of each host when the link is modelled between hosts only on several hosts of contiguous ranks
        (the transport's ``ranks_per_host``, which it leaves empty for ``scope: all``); () otherwise, and the
        summary's prediction is one level (the transport's :attr:`~hpcbench.collectives.linkmodel.LinkTransport.hosts_contiguous`:
        the two-level model takes hosts of contiguous ranks, Hydra's and srun's block placement)."""
        hosts = tuple(getattr(self.transport, "ranks_per_host", ()) or ())
        if len(hosts) <= 1 or sum(hosts) != self.comm.size or not getattr(self.transport, "hosts_contiguous", False):
            return ()
        return hosts

    @property
    def host_staging(self) -> bool:
        """Whether synchronisers get host copies of the buckets (``host_staging``; default: on a GPU)."""
        staged = self.cfg.host_staging
        return self.device.is_cuda if staged is None else bool(staged)

    @property
    def bucket_bytes(self) -> int:
        """Bucket capacity in bytes (``bucket_mb`` MiB, as DDP's ``bucket_cap_mb``)."""
        return int(self.cfg.bucket_mb * 2**20)

    def _profile(self, batch: int | None = None):
        """Rank 0 times ``profile_steps`` steps of the model alone at per-worker ``batch`` (default batch_size)."""
        from hpcbench.runtime.devicetime import DeviceClock
        from hpcbench.train.steps.profile import profile_compute
        from hpcbench.train.workloads.models import build_model

        cfg, data = self.cfg, self.data
        sizes = (batch or cfg.batch_size,) * self.comm.size

        def batches(step):      # rank 0's slice of the steps of a run at the configured batch
            return data.take(step * sum(sizes), sizes)

        model = build_model(cfg.model, cfg.seed, data, cfg.model_options).to(self.device.torch)
        return profile_compute(model, batches, cfg.profile_steps, cfg.lr, DeviceClock(self.device))

    def _clock(self):
        """``step_clock: {kind: modelled}``: rank 0's :class:`~hpcbench.train.steps.stepclock.ModelledClock` (the
        compute per batch timed here while the other ranks sleep, or read from ``profile_file``); None elsewhere.
        Collective (a failure on rank 0 is every rank's input error)."""
        import numpy as np

        from hpcbench.collectives.cost import link_beta
        from hpcbench.collectives.linkmodel import parse_rate
        from hpcbench.runtime.wait import sleep_bcast
        from hpcbench.train.steps.stepclock import ClockProfile, ModelledClock, load_clock_profile

        cfg, comm = self.cfg, self.comm
        c = cfg.step_clock
        clock, error = None, None
        if comm.rank == 0:
            try:
                if c.profile_file is not None:
                    prof = load_clock_profile(c.profile_file, cfg.model)
                else:
                    rows = [self._profile(b) for b in (c.profile_batches or [cfg.batch_size])]
                    prof = ClockProfile(np.array(c.profile_batches or [cfg.batch_size], dtype=np.int64),
                                        *(np.array([getattr(r, k) for r in rows])
                                          for k in ("forward_s", "backward_s", "optimizer_s")), self.profile)
                clock = ModelledClock(prof, self.plan, c.latency_s, link_beta(parse_rate(c.bandwidth)), cfg.overlap)
            except (OSError, KeyError, ValueError) as exc:
                error = f"step_clock.profile_file: {c.profile_file!r}: {exc}"
        if sleep_bcast(comm, error):
            raise InputError(error)
        return clock

    def _transport(self):
        return self._transport_on(self.sync_comm)

    def _transport_on(self, comm):
        """The configured links' transport over ``comm`` (sets the alpha-beta pair; collective over ``comm``)."""
        from hpcbench.collectives.transport import Transport

        link = self.cfg.link
        if link.kind != "model":
            self.alpha, self.beta = math.nan, math.nan
            return Transport(comm)
        from hpcbench.collectives.cost import link_beta
        from hpcbench.collectives.linkmodel import BandwidthReplay, LinkTransport, SlowLink, parse_rate

        trace = None
        self.alpha, self.beta = link.latency_s, link_beta(parse_rate(link.bandwidth))
        if link.wan_mean is not None:
            trace = BandwidthReplay.mobiperf_wan(parse_rate(link.wan_mean), link.trace_interval_s)
            self.beta = math.nan
        elif link.trace_index is not None:
            try:
                trace = BandwidthReplay.from_mobiperf(index=link.trace_index, interval_s=link.trace_interval_s,
                                                      scale=link.trace_scale)
            except ValueError as exc:
                raise InputError(f"link.trace_index: {link.trace_index}: {exc}") from None
            self.beta = math.nan   # time-varying: no single alpha-beta prediction
        slow = [SlowLink(e.rank, e.from_step, e.factor) for e in link.slow]
        return LinkTransport(comm, link.latency_s, link.bandwidth, trace=trace, dilation=self.dilation, slow=slow,
                             scope=link.scope)

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
                else f"MobiPerf WAN levels scaled to a mean of {link.wan_mean}, {link.trace_interval_s:g} s each"
                if link.wan_mean is not None else link.bandwidth)
        slow = "".join(f", rank {e.rank} x{e.factor:g} slower from step {e.from_step}" for e in link.slow)
        scope = ", between hosts only (shared memory inside a host)" if link.scope == "between_hosts" else ""
        return f"modelled: latency {link.latency_s * 1e6:g} us, bandwidth {rate}{slow}{scope}"

    def provenance(self) -> dict:
        from hpcbench.datasets.callables import user_callables

        cfg, prof = self.cfg, self.profile
        return dict(job_name=cfg.job_name, compute_mode=cfg.compute, time_dilation=cfg.time_dilation,
                    link_model=self._link_text(), workers=self.comm.size, model=cfg.model, task=self.task,
                    dataset_path=self._dataset_path(), classes=int(getattr(self.data, "classes", 0) or 0),
                    user_callables=user_callables(cfg.model, self.task),
                    parameters=int(sum(prof.numels)), gradient_bytes=int(4 * sum(prof.numels)),
                    buckets=len(self.plan.buckets), bucket_bytes=self.bucket_bytes,
                    compute_time_source=prof.source, profile_file=cfg.profile_file or "",
                    forward_s=prof.forward_s, backward_s=prof.backward_s,
                    optimizer_s=prof.optimizer_s, model_copy_s=prof.copy_s, model_scale_s=prof.scale_s,
                    model_axpy_s=prof.axpy_s, synchronisers=",".join(cfg.sync_labels()), overlap=cfg.overlap,
                    schedule=cfg.schedule, host_staging=self.host_staging, step_clock=cfg.step_clock.kind,
                    step_clock_link=cfg.step_clock.describe() if getattr(self, "clock", None) else "",
                    **self._gpu_provenance())

    def _dataset_path(self) -> str:
        """The folder an IDX set was read from (``""`` for bundled, synthetic or a user's data)."""
        from hpcbench.datasets.idx import FASHION_MNIST_DIR

        section = self.cfg.dataset
        if self.task not in ("fashion_mnist", "idx"):
            return ""
        return section.path or FASHION_MNIST_DIR

    def _gpu_provenance(self) -> dict:
        """The device's attributes; the profile's device too (rank 0 profiled, or the replayed file's)."""
        from hpcbench.runtime.gpuinfo import gpu_provenance

        attrs = gpu_provenance(self.device)
        attrs["profile_device"] = self.profile_device
        return attrs

    def _header(self) -> str:
        cfg, prof, p = self.cfg, self.profile, self.comm.size
        n = sum(prof.numels)
        data = (f"{cfg.image_size}x{cfg.image_size} synthetic images (KungFu)" if self.task == "synthetic"
                else self.task)
        return (f"{self.prog}: {cfg.model} ({n / 1e6:.2f}M parameters, {4 * n / 1e6:.1f} MB of gradients in "
                f"{len(self.plan.buckets)} buckets of <= {cfg.bucket_mb:g} MiB), batch {cfg.batch_size} per "
                f"worker, {data}, {p} workers\n"
                f"compute {cfg.compute} ({prof.source}: forward {prof.forward_s * 1e3:.1f} ms, backward "
                f"{prof.backward_s * 1e3:.1f} ms, optimizer {prof.optimizer_s * 1e3:.1f} ms per step), time "
                f"dilation {cfg.time_dilation:g}, link {self._link_text()}, overlap "
                f"{'on' if cfg.overlap else 'off'}, schedule {cfg.schedule}"
                + (f"\nstep clock modelled: compute per batch ({self.clock.profile.source}) at per-worker batches "
                   f"{', '.join(map(str, self.clock.profile.batches))}, communication priced at "
                   f"{cfg.step_clock.describe()} (steps.modelled_step_s; steps.step_s stays the wall clock)"
                   if self.clock is not None else ""))

    # -- run -----------------------------------------------------------------------------------------
    def run(self, results) -> int:
        from hpcbench.train.reporting.report import Report
        from hpcbench.train.reporting.tables import make_tables
        from hpcbench.train.steps.hooks import FaultHook, Progress

        cfg, comm, setup = self.cfg, self.comm, self.setup
        monitor_columns = self.cfg.monitor_columns()
        report = progress = None
        if comm.rank == 0:
            self.tables = tables = make_tables(results, monitor_columns)
            tables["buckets"].append(dict(
                bucket=list(range(len(self.plan.buckets))), bytes=[int(b) for b in self.plan.nbytes],
                params=[len(b) for b in self.plan.buckets],
                ready_s=list(self.plan.ready_times(self.profile.param_ready_s)),
                need_s=list(self.bucket_need_s)))
            prof = self.profile
            tables["profile"].append(dict(param=list(range(len(prof.numels))), numel=[int(n) for n in prof.numels],
                                          ready_s=[float(r) for r in prof.param_ready_s],
                                          need_s=[float(r) for r in prof.need_times()]))
            if self.clock is not None:
                tables["clock_profile"].append(self.clock.profile.rows())
            progress = Progress(None, cfg.progress)
            report = Report(setup, tables, monitor_columns, progress,
                            tag_entries=cfg.interleave_sync and len(cfg.sync) > 1, clock=self.clock)
            from hpcbench.policies import POLICIES

            report.detail_tables = {n: POLICIES[p.name].detail_table for n, p in zip(cfg.policy_names(), cfg.policies)
                                    if POLICIES[p.name].detail_table}
            print(self._header())
            sys.stdout.flush()
        fault = FaultHook()     # numbers the steps over the whole job
        telemetry, recorder = self._telemetry(results, tables if comm.rank == 0 else None)
        runs = []
        try:
            for label, section, schedule in cfg.sync_entries():
                if report is not None:
                    report.entry_order.append(label)
                sync, error = self._build_sync(section)
                if error:
                    if report is not None:
                        report.skipped(label, error, schedule)
                    continue
                runs.append(self._loop(label, sync, schedule, [fault, report, progress], telemetry))
            if progress is not None:
                progress.bar.reset(total=sum(r.plan.total_steps for r in runs))
            self._drive([r.run() for r in runs], cfg.interleave_sync)
        finally:
            for r in runs:
                if r.ctx.sync is not None:      # None: an elastic run closed it on this rank
                    r.ctx.sync.close()          # the active one: a policy may have switched it
        if recorder is not None:
            self._write_trace(results, recorder)
        if report is not None:
            progress.close()
            report.comparison()
            sys.stdout.flush()
        return 0

    def _telemetry(self, results, tables):
        """The job's telemetry hook (None without telemetry) and this rank's trace recorder (None without a
        trace); rank 0's ``telemetry`` table and the policies' detail tables join ``tables``."""
        from hpcbench.policies import POLICIES

        cfg = self.cfg
        classes = [POLICIES[p.name] for p in cfg.policies]
        if not (cfg.telemetry or cfg.chrome_trace or any(c.needs_telemetry for c in classes)):
            return None, None
        from hpcbench.results import Column
        from hpcbench.results.records import columns_of
        from hpcbench.train.reporting.telemetryhook import TelemetryHook, telemetry_columns

        table = None
        if tables is not None:
            table = tables["telemetry"] = results.table("telemetry", telemetry_columns(),
                                                        "one row per step and rank (StellaTrain's telemetry)")
            for c in classes:
                if c.detail_table and c.detail_table not in tables:
                    tables[c.detail_table] = results.table(
                        c.detail_table, [Column("sync", "str", "", "the entry whose run it decided for"),
                                         *columns_of(c.detail_type())], f"one row per decision of policy {c.name}")
        recorder = None
        if cfg.chrome_trace:
            from hpcbench.results.chrome_trace import TraceRecorder
            from hpcbench.runtime.wait import sleep_barrier

            sleep_barrier(self.comm)
            recorder = TraceRecorder(self.comm.rank, self.dilation.now())
        return TelemetryHook(table, recorder), recorder

    def _write_trace(self, results, recorder) -> None:
        """Gather every rank's trace events to rank 0 and write them (collective)."""
        from hpcbench.results.chrome_trace import write_run_trace

        path = self.output_path("chrome_trace") if self.comm.rank == 0 else None
        write_run_trace(self.comm, recorder, results, path, "train", self.prog)

    def outputs(self, results):
        from hpcbench.results.chrome_trace import trace_output

        trace = trace_output(self.cfg.chrome_trace, results)
        return () if trace is None else (trace,)

    def _loop(self, label: str, sync, schedule: str, job_hooks, telemetry=None):
        """One entry's loop: its context, its hooks (fault point, monitors, then rank 0's report and bar)."""
        from hpcbench.train.steps.context import BatchState, TrainContext
        from hpcbench.train.steps.hooks import LinkStepHook, MonitorHook
        from hpcbench.train.steps.loop import TrainLoop
        from hpcbench.train.steps.plan import MeasuredPlan

        cfg, comm = self.cfg, self.comm
        monitors = MonitorHook(cfg.monitor_entries(), cfg.monitor_interval, cfg.interleave_monitors)
        plan = MeasuredPlan(cfg.warmup, cfg.iterations, cfg.batches_per_iter, [v for v, _ in monitors.variants])
        state = BatchState((cfg.batch_size,) * comm.size, cfg.lr, comm.rank)
        ctx = TrainContext(self.setup, label, sync, schedule, self.setup.bucket_order(sync, schedule), state,
                           plan=plan)
        fault, *rank0 = job_hooks
        policies = self._policies(label)
        if cfg.elastic is not None:
            from hpcbench.train.adaptation.elastic import ElasticRun

            ctx.elastic = ElasticRun(comm, cfg.elastic.initial(comm.size), cfg.elastic.batch,
                                     self.tables["resizes"] if comm.rank == 0 else None, cfg.elastic.mode)
        # the telemetry hook after the policies': its after_step (rank 0's table) runs before theirs
        hooks = [*([LinkStepHook()] if cfg.link.slow else []), fault, monitors, *([policies] if policies else []), *([telemetry] if telemetry else []),
                 *([ctx.elastic] if ctx.elastic else []), *(h for h in rank0 if h is not None)]
        return TrainLoop(ctx, hooks, plan, policies, telemetry)

    def _policies(self, label: str):
        """A fresh :class:`~hpcbench.train.adaptation.policyhook.PolicyHook` of the configured policies for entry ``label``'s
        run (one per run: policies keep state), or None without policies."""
        if not self.cfg.all_policies():
            return None
        from hpcbench.policies import POLICIES
        from hpcbench.train.adaptation.policyhook import PolicyHook

        built = [(name, POLICIES[s.name](s)) for name, s in self.cfg.all_policies()]
        return PolicyHook(built, self.comm)

    @staticmethod
    def _drive(gens: list, interleave: bool) -> None:
        """Run the entries one after the other, or their iterations in turn: each round in the order of a
        Williams design (:func:`hpcbench.runtime.interleave.balanced_orders`), so that every entry follows
        every other equally often; the warm-ups take the design's last round."""
        if not interleave:
            for g in gens:
                for _ in g:
                    pass
            return
        from hpcbench.runtime.interleave import balanced_orders

        orders = balanced_orders(len(gens))
        live, k = list(gens), len(orders) - 1
        while any(g is not None for g in live):
            for i in orders[k % len(orders)]:
                if live[i] is not None and next(live[i], StopIteration) is StopIteration:
                    live[i] = None
            k += 1

    def _build_sync(self, section):
        from hpcbench.sync import Unavailable, build

        sync, error = None, None
        try:
            sync = build(section, self.sync_comm, self.transport, bucket_bytes=self.bucket_bytes, seed=self.cfg.seed,
                         device=self.device)
        except Unavailable as exc:
            error = str(exc)
        error = agree(self.comm, error)
        if error and sync is not None:
            sync.close()
        return sync, error

"""Typed job configuration of ``python -m hpcbench.train`` (YAML, ``--dotted.key VALUE`` overrides).

Allowed names come from the registries: models from
:data:`hpcbench.train.workloads.models.MODELS`, synchronisers from
:data:`hpcbench.sync.SYNCHRONISERS` (each ``sync`` entry is that class's own
section, ``{name: sma, alpha: 0.1}``, or just its name), monitors from
:data:`hpcbench.monitors.MONITORS`.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, Optional, Union

from pydantic import Field, PositiveInt, TypeAdapter, ValidationError, field_validator, model_validator

from hpcbench.collectives.link_config import LinkConfig
from hpcbench.policies import POLICIES
from hpcbench.runtime import config as _config
from hpcbench.runtime.config import ConfigError, Strict, short_repr, strategy_section
from hpcbench.sync import SYNCHRONISERS
from hpcbench.train.steps.stepclock import StepClockConfig
from hpcbench.train.synchronisation.section import _RING, SyncEntry, SyncSection

__all__ = ["LinkConfig", "ElasticConfig", "TrainConfig", "load_config", "flatten_keys", "ConfigError", "SCHEDULES", "SyncEntry",
           "SyncSection", "PolicyEntry", "TrainDatasetConfig"]

#: bucket schedules (:mod:`hpcbench.train.synchronisation.priority`)
SCHEDULES = ("fifo", "priority")


#: one ``policies`` entry: a policy's section, or its name
PolicyEntry, _ = strategy_section(POLICIES, "policies")
_POLICY_SECTION = TypeAdapter(PolicyEntry)


class ElasticConfig(Strict):
    """The elastic worker set (KungFu's figure 7): ranks beyond the active count wait, sleeping, in a warm pool.

    ``schedule`` adds an ``elastic`` policy (:mod:`hpcbench.policies.elastic`)
    that drives the worker count; other policies may decide ``workers`` too.
    """

    schedule: Optional[dict[Annotated[int, Field(ge=0)], PositiveInt]] = Field(
        None, description="active workers from each step on, e.g. '0:1, 50:2, 100:4, 150:2' (key 0: the start)")
    workers: Optional[PositiveInt] = Field(None, description="active workers at the start (default: the "
                                                             "schedule's key 0, else every rank)")
    batch: Literal["keep_global", "keep_local"] = Field(
        "keep_global", description="at a resize: keep_global splits the same global batch over the new workers; "
                                   "keep_local keeps each worker's batch (the global batch scales)")
    mode: Literal["warm_pool"] = Field("warm_pool", description="warm_pool: ranks started by mpirun wait, "
                                                                "sleeping, until a grow activates them")

    @field_validator("schedule", mode="before")
    @classmethod
    def _parse(cls, v):
        from hpcbench.policies.batch_schedule import parse_schedule

        return parse_schedule(v)

    @model_validator(mode="after")
    def _start(self):
        if self.schedule is not None and self.workers is not None and self.schedule.get(0, self.workers) != \
                self.workers:
            raise ValueError(f"workers: {self.workers} differs from the schedule's key 0 ({self.schedule[0]})")
        return self

    def initial(self, world: int) -> int:
        """Active workers at the start of a run on ``world`` ranks."""
        if self.workers is not None:
            return self.workers
        if self.schedule and 0 in self.schedule:
            return self.schedule[0]
        return world


class TrainDatasetConfig(Strict):
    """The data a job trains on (:mod:`hpcbench.train.workloads.datasets`); without a name, the registered
    model's own."""

    name: Optional[str] = Field(None, description="digits, shakespeare, fashion_mnist, idx (any folder of IDX "
                                                  "files: MNIST, EMNIST, KMNIST) or a user's package.module:callable "
                                                  "(docs/byo.md); default: the model's own data")
    path: Optional[str] = Field(None, description="folder of the IDX files (fashion_mnist: default "
                                                  "/usr/share/datasets/fashion-mnist; idx: required)")
    prefix: str = Field("", description="idx: the file-name prefix of one set in a folder of several "
                                        "(EMNIST's emnist-balanced-)")
    max_test_samples: int = Field(1000, ge=1, description="held-out samples evaluated (a seeded subset of the "
                                                          "set's test split) after each iteration")
    options: dict[str, Any] = Field({}, description="free-form keys for a package.module:callable dataset "
                                                    "factory")

    @field_validator("name")
    @classmethod
    def _name(cls, v):
        from hpcbench.datasets.callables import registered_or_callable
        from hpcbench.train.workloads.datasets import DATASETS

        return None if v is None else registered_or_callable(v, DATASETS, "dataset.name")


def _monitor_entry(entry) -> tuple[str, dict]:
    """``"gns"`` -> ``("gns", {})``; ``{name: variance, estimator: trace}`` -> ``("variance", {estimator: trace})``.

    Raises
    ------
    ValueError
        A section without a ``name``, or one giving ``interval`` (the job's ``monitor_interval`` is every
        monitor's).
    """
    if isinstance(entry, str):
        return entry, {}
    options = dict(entry)
    name = options.pop("name", None)
    if not isinstance(name, str):
        raise ValueError(f"monitor section {entry!r} has no name (e.g. {{name: variance, estimator: trace}})")
    if "interval" in options:
        raise ValueError(f"monitor {name!r}: interval is the job's monitor_interval, not a monitor option")
    return name, options


class TrainConfig(Strict):
    """One training job: a model, its data, and the synchronisers to run side by side."""

    job_name: str = "train"
    output: str = "results/{job_name}-{start}.h5"
    seed: int = 0
    model: str = Field("resnet18", description="resnet18, resnet50, mobilenet_v2, vgg16, digits_mlp, digits_cnn, "
                                                   "shakespeare_lstm, leaf_cnn (LEAF's CNN: Fashion-MNIST or the "
                                                   "dataset's images) or a user's package.module:callable "
                                                   "(docs/byo.md; needs dataset)")
    model_options: dict[str, Any] = Field({}, description="leaf_cnn: {hidden_dense: 2048}; a callable: free-form "
                                                          "keys for its factory")
    dataset: TrainDatasetConfig = Field(TrainDatasetConfig(), description="the data, when not the model's own: "
                                                                           "--dataset.name fashion_mnist (below)")
    image_size: int = Field(224, ge=8, description="synthetic images are image_size x image_size (KungFu: 224)")
    batch_size: int = Field(32, ge=1, description="samples per worker per step")
    lr: float = Field(0.01, gt=0.0, description="SGD learning rate (KungFu: 0.01)")
    epoch_size: Optional[int] = Field(None, ge=1, description="samples per epoch, all workers together (KungFu's "
                                                              "--epoch-size); default: the training set (digits: "
                                                              "1347); synthetic images have no epochs unless given")
    warmup: int = Field(10, ge=0, description="warm-up steps before each synchroniser's measurement")
    iterations: int = Field(10, ge=1, description="measured iterations (per monitor variant)")
    batches_per_iter: int = Field(10, ge=1, description="steps per iteration")
    sync: list[SyncEntry] = Field([_RING], description="synchronisers, run one after the other: each a name or "
                                                       "its section {name: NAME, ...its keys} (below); "
                                                       "NAME:SCHEDULE (ring:priority) sets one entry's schedule")
    interleave_sync: bool = Field(False, description="run the synchronisers' iterations in turn, so that drifts "
                                                     "of the machine's load fall on all alike (each round in the "
                                                     "order of a Williams design: every entry follows every other "
                                                     "equally often)")
    bucket_mb: float = Field(25.0, gt=0.0, description="gradient bucket size in MiB (DDP's default 25)")
    overlap: bool = Field(True, description="start each bucket during backward (false: after backward)")
    schedule: Literal["fifo", "priority"] = Field(
        "fifo", description="fifo: buckets reduced as backward completes them, all before the optimizer step "
                            "(DDP); priority: one at a time, the bucket the next forward needs first, each "
                            "bucket's update just before its first use (ByteScheduler, P3)")
    policies: list[PolicyEntry] = Field([], description="adaptation policies (hpcbench.policies registry), each "
                                                        "its section {name: NAME, ...its keys} (below); their "
                                                        "hooks run in this order before a step, in reverse after")
    elastic: Optional[ElasticConfig] = Field(None, description="elastic worker set: the active workers may grow "
                                                                "and shrink while training (below)")
    monitors: list[Union[str, dict[str, Any]]] = Field(
        [], description="online monitors (hpcbench.monitors registry): each a name or {name: NAME, ...its options}, "
                        "e.g. {name: variance, estimator: trace} (the trace of the gradient covariance, no second "
                        "allreduce), {name: gns, estimator: mean, alpha: 0.9}")
    monitor_interval: int = Field(1, ge=1)
    interleave_monitors: bool = Field(False, description="cycle iterations through no monitor and each monitor "
                                                         "alone (figure 8)")
    compute: Literal["real", "emulated"] = "real"
    compute_time_s: Optional[float] = Field(None, gt=0.0, description="emulated: one step's compute (forward, "
                                                                      "backward, optimizer); default profiled")
    profile_steps: int = Field(3, ge=1, description="steps timed to profile the compute")
    profile_file: Optional[str] = Field(None, description="emulated: replay the compute profile of this earlier "
                                                          "train result file instead of profiling (one timeline "
                                                          "for a whole sweep)")
    time_dilation: float = Field(1.0, ge=1.0)
    speed: Union[list[float], str] = Field("1:1", description="per-rank compute slowdown factors (a list cycled "
                                                               "over the ranks, 'k:1' for every other rank k times "
                                                               "slower: StellaTrain's 2:1 workers, or 'trace'); "
                                                               "emulated: the profile stretched; real (cpu): a sleep "
                                                               "of (k - 1) times each forward's and backward's "
                                                               "measured time after it")
    link: LinkConfig = LinkConfig()
    device: Literal["cpu", "cuda", "auto"] = Field(
        "cpu", description="where real compute runs: cpu, cuda (one GPU per rank: the node-local rank modulo the "
                           "visible GPUs; exit 2 when none is visible) or auto (cuda where a GPU is visible)")
    host_staging: Optional[bool] = Field(
        None, description="hand the synchronisers host copies of the gradient buckets (pinned memory on a GPU, "
                          "copied as backward completes each); default: on a GPU, not on the CPU (true on the CPU "
                          "measures the staging's own cost)")
    telemetry: bool = Field(False, description="per-step, per-rank telemetry (StellaTrain's: forward/backward, "
                                               "gaps, send/receive throughput, batch, compression) in the telemetry "
                                               "table; on whenever a policy reads it")
    chrome_trace: Union[bool, str] = Field(False, description=(
        "write a Chrome trace JSON (Perfetto, chrome://tracing) of every rank's forward, backward, bucket "
        "reductions and optimizer steps: true for RUN.trace.json beside the HDF5 file, or a path (implies "
        "telemetry)"))
    progress: bool = Field(True, description="tqdm bar on rank 0")
    step_clock: StepClockConfig = Field(StepClockConfig(), description=(
        "measured (default) or modelled: real training whose steps are also timed by a model, the compute "
        "profiled per batch plus the allreduce priced on a link (hpcbench.train.steps.stepclock; figure 4 at more "
        "workers than cores)"))

    @field_validator("speed")
    @classmethod
    def _speed_form(cls, v):
        from hpcbench.traces.speed import check_speed_spec

        return check_speed_spec(v)

    @field_validator("chrome_trace")
    @classmethod
    def _trace_path(cls, v):
        from hpcbench.results.chrome_trace import check_trace_setting

        return check_trace_setting(v)

    @field_validator("model")
    @classmethod
    def _model(cls, v):
        from hpcbench.datasets.callables import registered_or_callable
        from hpcbench.train.workloads.models import MODELS

        return registered_or_callable(v, MODELS, "model")

    @field_validator("sync")
    @classmethod
    def _sync(cls, v):
        if not v:
            raise ValueError("give at least one synchroniser")
        labels = [s.entry_label() for s in v]
        twice = [x for i, x in enumerate(labels) if x in labels[:i]]
        if twice:
            raise ValueError(f"entry {twice[0]!r} listed twice; give each entry of one synchroniser its own label")
        return v

    @field_validator("monitors")
    @classmethod
    def _monitors(cls, v):
        from hpcbench.monitors import MONITORS, build_monitor

        labels = []
        for i, m in enumerate(v):
            name, options = _monitor_entry(m)
            MONITORS.check(name)
            label = name
            if options:     # a monitor built from its options checks them (the message names the option)
                try:
                    label = build_monitor(name, **options).label
                except ValueError as exc:
                    raise ValueError(f"monitors.{i}: {exc}") from None
            if label in labels:
                raise ValueError(f"monitors.{i}: monitor {label!r} listed twice")
            labels.append(label)
        return v

    def monitor_columns(self) -> list[str]:
        """The monitors' output columns (``LABEL_OUTPUT``: ``gns_gns_b_simple``, ``variance_trace_grad_variance``),
        the keys of ``Telemetry.monitors``."""
        if not self.monitors:   # the monitors import torch
            return []
        from hpcbench.monitors import build_monitor

        built = (build_monitor(m, **options) for m, options in self.monitor_entries())
        return [f"{m.label}_{out}" for m in built for out in m.outputs]

    def monitor_entries(self) -> list[tuple[str, dict]]:
        """``(name, options)`` of every ``monitors`` entry (options without ``interval``: the job's
        ``monitor_interval``)."""
        return [_monitor_entry(m) for m in self.monitors]

    @model_validator(mode="after")
    def _workload(self):
        """The model and its data fit: a callable needs a dataset; a registered model trains on its own data
        (``leaf_cnn`` on any image set); ``model_options`` are keys the model reads."""
        from hpcbench.datasets.callables import is_callable_name
        from hpcbench.train.workloads.datasets import DATASETS
        from hpcbench.train.workloads.models import MODELS

        data = self.dataset.name
        if is_callable_name(self.model):
            if data is None:
                raise ValueError(f"model: {self.model!r} (a package.module:callable) needs a dataset section "
                                 f"(dataset.name: fashion_mnist, or your own package.module:callable)")
            return self
        spec = MODELS[self.model]
        unknown = sorted(set(self.model_options) - set(spec.options))
        if unknown:
            raise ValueError(f"model_options: {self.model!r} reads {', '.join(spec.options) or 'no options'}; "
                             f"got {unknown[0]!r}")
        width = self.model_options.get("hidden_dense", 1)
        if isinstance(width, bool) or not isinstance(width, int) or width < 1:
            raise ValueError(f"model_options.hidden_dense: {width!r}; expected a positive integer (units of "
                             f"LEAF's dense layer)")
        if data is not None and data != spec.task:
            if not spec.any_images:
                raise ValueError(f"dataset.name: {data!r}: model {self.model!r} trains on {spec.task} only (give "
                                 f"model leaf_cnn or a package.module:callable model for other data)")
            if not is_callable_name(data) and DATASETS[data] != "images":
                raise ValueError(f"dataset.name: {data!r} gives {DATASETS[data]}; model {self.model!r} reads "
                                 f"images")
        return self

    @model_validator(mode="after")
    def _consistent(self):
        get = SYNCHRONISERS.__getitem__
        if self.compute == "real":
            if self.time_dilation != 1.0:
                raise ValueError(f"time_dilation: {self.time_dilation} needs compute: emulated (real compute "
                                 f"cannot be dilated)")
            if self.compute_time_s is not None:
                raise ValueError(f"compute_time_s: {self.compute_time_s} needs compute: emulated")
            if self.profile_file is not None:
                raise ValueError(f"profile_file: {self.profile_file!r} needs compute: emulated (real compute is "
                                 f"the model's own)")
            if self.speed not in ("1:1", [1.0]) and self.device != "cpu":
                raise ValueError(f"speed: {self.speed!r} with real compute needs device: cpu (the slowdown is a "
                                 f"sleep after each forward and backward, timed on the host)")
        else:
            bad = [s for s, sec, _ in self.sync_entries() if not get(sec.name).emulates]
            if bad:
                raise ValueError(f"sync: {bad[0]!r} needs compute: real (it runs the real model)")
        prio = [(s, sec.name) for s, sec, sched in self.sync_entries() if sched == "priority"]
        if prio and (self.host_staging or self.device != "cpu"):
            key = "host_staging: true" if self.host_staging else f"device: {self.device!r}"
            raise ValueError(f"schedule: 'priority' (sync {prio[0][0]!r}) reduces the buckets in place in a fixed "
                             f"order and is not staged through host memory; {key} needs schedule: fifo")
        if self.host_staging is False and self.device == "cuda":
            raise ValueError("host_staging: false with device: 'cuda': hpcbench's collectives move host memory "
                             "only (device buffers need host staging)")
        if prio:
            if not self.overlap:
                raise ValueError("schedule: 'priority' needs overlap: true (buckets start during backward)")
            bad = [s for s, base in prio if not get(base).schedulable]
            if bad:
                raise ValueError(f"schedule: 'priority' needs synchronisers with an ordered start (hpcbench's "
                                 f"allreduce algorithms); sync {bad[0]!r} has none")
        if self.monitors:
            bad = [s for s, sec, _ in self.sync_entries() if get(sec.name).averages == "models"]
            if bad:
                raise ValueError(f"monitors: {self.monitors} need synchronised gradients; sync {bad[0]!r} "
                                 f"averages models")
        elif self.interleave_monitors:
            raise ValueError("interleave_monitors: true needs at least one entry in monitors")
        self._check_policies()
        self._check_clock()
        self._check_elastic()
        self._check_pipelined()
        return self

    def _check_clock(self) -> None:
        """A modelled step clock prices real compute (an emulated one is already modelled) with each
        synchroniser's cost model."""
        clock = self.step_clock
        if clock.kind != "modelled":
            given = [k for k in ("profile_batches", "profile_file") if getattr(clock, k)]
            if given:
                raise ValueError(f"step_clock.{given[0]}: {getattr(clock, given[0])!r} needs step_clock.kind: "
                                 f"modelled")
            return
        if self.compute != "real":
            raise ValueError(f"step_clock.kind: 'modelled' needs compute: real (compute: {self.compute!r} is "
                             f"already modelled)")
        bad = [s for s, sec, _ in self.sync_entries() if SYNCHRONISERS[sec.name].cost_model is None]
        if bad:
            raise ValueError(f"step_clock.kind: 'modelled': sync {bad[0]!r} has no cost model to price its "
                             f"communication")
        if clock.profile_file is not None and clock.profile_batches:
            raise ValueError(f"step_clock.profile_batches: {clock.profile_batches} and profile_file "
                             f"{clock.profile_file!r} both give the compute per batch; give one")

    def _check_pipelined(self) -> None:
        """The CPU sparse optimizer and staleness 1 (:mod:`hpcbench.train.steps.pipelined`) run on a real CPU replica
        with FIFO buckets, without monitors or an elastic worker set."""
        for label, sec, schedule in self.sync_entries():
            keys = [k for k in ("optimizer", "staleness") if getattr(sec, k, None)]
            if not keys:
                continue
            what = f"sync {label!r}: {keys[0]}"
            if self.compute != "real":
                raise ValueError(f"{what} needs compute: real (it changes the model's update, which an emulated "
                                 f"replica does not have)")
            if schedule != "fifo":
                raise ValueError(f"{what} needs schedule: fifo (the priority schedule applies its own per-bucket "
                                 f"updates)")
            if self.device != "cpu" or self.host_staging:
                raise ValueError(f"{what} needs device: cpu without host_staging (the sparse optimizer updates "
                                 f"host float32 parameters in place)")
            if self.monitors:
                raise ValueError(f"{what}: monitors {self.monitors} need the dense reduced gradients (give "
                                 f"monitors: [])")
            if self.elastic is not None:
                raise ValueError(f"{what}: an elastic worker set moves the dense optimizer's state only (give no "
                                 f"elastic section)")

    def _check_elastic(self) -> None:
        if self.elastic is None:
            return
        if self.interleave_sync and len(self.sync) > 1:
            raise ValueError("elastic: the worker set changes within one entry's run; interleave_sync: true "
                             "would interleave several runs' worker sets (give interleave_sync: false)")
        if self.monitors:
            raise ValueError(f"elastic: monitors {self.monitors} keep per-run state a joining worker does not "
                             f"receive (give monitors: [])")
        if self.telemetry or self.chrome_trace or any(POLICIES[p.name].needs_telemetry for p in self.policies):
            raise ValueError("elastic: telemetry (telemetry, chrome_trace or a policy reading it, such as "
                             "stellatrain) meters a fixed worker set; not combined with an elastic one yet")
        deciding = [f"policies.{i}" for i, p in enumerate(self.policies) if "workers" in POLICIES[p.name].decides]
        if self.elastic.schedule and deciding:
            raise ValueError(f"elastic.schedule: {deciding[0]} decides the worker count too (give one of them)")
        bad = [s for s, sec, _ in self.sync_entries() if SYNCHRONISERS[sec.name].averages == "wrapped"]
        if bad:
            raise ValueError(f"elastic: sync {bad[0]!r} wraps the model (DDP, Horovod: their process group is "
                             f"fixed); use hpcbench's synchronisers")

    def _check_policies(self) -> None:
        from hpcbench.train.adaptation.decisions import APPLIERS
        from hpcbench.train.reporting.tables import STEP_FIELDS

        for i, p in enumerate(self.policies):
            cls = POLICIES[p.name]
            if "workers" in cls.decides and self.elastic is None:
                raise ValueError(f"policies.{i}: {p.name!r} decides the worker count: give an elastic section "
                                 f"(elastic: {{workers: N}}) for the warm pool")
            missing = sorted(set(cls.decides) - set(APPLIERS))
            if missing:
                raise ValueError(f"policies.{i}: {p.name!r} decides {', '.join(missing)}, which the training "
                                 f"runner cannot apply (it applies {', '.join(APPLIERS)})")
            if "compress_ratio" in cls.decides:
                bad = [lab for lab, sec, _ in self.sync_entries() if not SYNCHRONISERS[sec.name].adjusts_ratio(sec)]
                if bad:
                    raise ValueError(f"policies.{i}: {p.name!r} sets the compression ratio; sync {bad[0]!r} cannot "
                                     f"change it (use {{name: compressed, compressor: {{name: topk}}}} or another "
                                     f"compressor that takes a ratio)")
            if p.needs_link_times() and self.link.kind != "model":
                raise ValueError(f"policies.{i}: {p.name!r} reads each rank's measured link time per byte, which "
                                 f"modelled links measure: give link.kind: model")
            if p.needs_epochs() and self.epoch_size is None and self.data_name() == "synthetic":
                raise ValueError(f"policies.{i}: {p.name!r} acts on epochs; synthetic images have none: set "
                                 f"epoch_size (samples per epoch)")
            for section in p.sync_sections():
                try:
                    SyncSection.validate_python(section)
                except ValidationError as exc:
                    raise ValueError(f"policies.{i}: {p.name!r} switches to sync {short_repr(section)}: "
                                     f"{exc.errors()[0]['msg']}") from None
            columns = self.monitor_columns()
            missing = [c for c in p.monitor_columns() if c not in columns and c not in STEP_FIELDS]
            if missing:
                raise ValueError(f"policies.{i}: {p.name!r} reads {missing[0]!r}, which is no telemetry field "
                                 f"({', '.join(STEP_FIELDS)}) and no output of this job's monitors (outputs: "
                                 f"{', '.join(columns) or 'none'})")

    def all_policies(self) -> list[tuple[str, object]]:
        """``(name, section)`` of every policy of a run: :attr:`policies`, then the ``elastic`` schedule's policy."""
        out = list(zip(self.policy_names(), self.policies))
        if self.elastic is not None and self.elastic.schedule:
            out.append(("elastic", _POLICY_SECTION.validate_python({"name": "elastic",
                                                                    "schedule": self.elastic.schedule})))
        return out

    def policy_names(self) -> list[str]:
        """Each policy's name in messages and the ``decisions`` table (``NAME``, or ``NAME#i`` when a policy is
        listed twice)."""
        names = [p.name for p in self.policies]
        return [n if names.count(n) == 1 else f"{n}#{i}" for i, n in enumerate(names)]

    def sync_entries(self) -> list[tuple[str, "SyncEntry", str]]:
        """``(label, section, schedule)`` of every ``sync`` entry: ``"ring:priority"`` gives
        ``("ring:priority", {name: ring, schedule: priority}, "priority")``; an entry without a schedule takes
        :attr:`schedule`."""
        return [(s.entry_label(), s, s.schedule or self.schedule) for s in self.sync]

    def data_name(self) -> str:
        """The data this job trains on: ``dataset.name``, else the registered model's (``synthetic``, ``digits``,
        ``shakespeare``, ``fashion_mnist``)."""
        from hpcbench.train.workloads.models import data_name

        return data_name(self.model, self.dataset.name)

    def sync_labels(self) -> list[str]:
        """The entries' labels, in order (the ``sync`` column of the tables)."""
        return [s.entry_label() for s in self.sync]


def flatten_keys() -> list[str]:
    """Every dotted key of :class:`TrainConfig`."""
    return _config.flatten_keys(TrainConfig)


def load_config(path=None, overrides=None) -> TrainConfig:
    """Read and validate a training job file; :class:`ConfigError` names the key and the value."""
    return _config.load_config(TrainConfig, path, overrides)

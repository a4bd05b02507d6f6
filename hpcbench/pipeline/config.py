"""Typed job configuration of ``python -m hpcbench.pipeline`` (YAML, ``--dotted.key VALUE`` overrides)."""

from __future__ import annotations

from typing import Literal, Union

from pydantic import Field, TypeAdapter, field_validator, model_validator

from hpcbench.allocation import ALLOCATORS, SCHEDULES
from hpcbench.collectives.link_config import LinkConfig
from hpcbench.pipeline.adaptive import START
from hpcbench.runtime import config as _config
from hpcbench.runtime.config import ConfigError, Strict, short_repr, strategy_section
from hpcbench.runtime.registry import Registry
from hpcbench.traces.speed import check_speed_spec

__all__ = ["ModelConfig", "DevicesConfig", "LinkConfig", "AdaptiveConfig", "PipelineConfig", "load_config",
           "flatten_keys", "ConfigError", "AllocatorEntry"]

#: the runner's allocators: the registered ones, and ``adaptive`` (run-time re-balancing from ``START``'s split,
#: :mod:`hpcbench.pipeline.adaptive`; its keys are the ``adaptive`` section)
PIPELINE_ALLOCATORS = Registry("allocator", {**ALLOCATORS, "adaptive": ALLOCATORS[START]})
#: one ``allocators`` entry: an allocator's section ``{name: NAME, ...its options}``, or its name
AllocatorEntry, _ = strategy_section(PIPELINE_ALLOCATORS, "allocators")
_ALLOCATOR_SECTION = TypeAdapter(AllocatorEntry)
#: keys that were top-level and are an allocator's options now: old key -> (allocator, option)
_MOVED = {"milp_time_limit_s": ("sky-milp", "time_limit_s"), "milp_solver": ("sky-milp", "solver")}


class ModelConfig(Strict):
    """BERT-style encoder stack; its pipeline layers are embedding, ``layers`` encoders, pooler, classifier."""

    layers: int = Field(22, ge=1, description="encoder layers (pipeline layers = layers + 3)")
    hidden: int = Field(64, ge=8)
    heads: int = Field(4, ge=1)
    seq_len: int = Field(32, ge=2)
    vocab: int = Field(1000, ge=8)
    classes: int = Field(4, ge=2)

    @model_validator(mode="after")
    def _heads_divide(self):
        if self.hidden % self.heads:
            raise ValueError(f"model.hidden ({self.hidden}) must be a multiple of model.heads ({self.heads})")
        return self


class DevicesConfig(Strict):
    """Heterogeneous devices, one per rank.

    ``speed``: per-device slowdown factors (a list, one per rank, cycled), a
    ratio ``"k:1"`` (every other device ``k`` times slower, the first fast),
    or ``"trace"`` (factors sampled from the bundled AI-Benchmark device
    trace, latency over the smallest sampled latency). ``mem_cap_mb``: a cap
    per device (one value for all, or a list cycled), null for none.
    ``change_at``/``change_speed``: from iteration ``change_at`` (counted from 1
    over each allocator's run) the factors become ``change_speed`` (same forms).
    """

    speed: Union[list[float], str] = "1:1"
    mem_cap_mb: Union[float, list[float], None] = None
    change_at: int = Field(0, ge=0)
    change_speed: Union[list[float], str, None] = None

    @field_validator("speed", "change_speed")
    @classmethod
    def _speed_form(cls, v):
        return v if v is None else check_speed_spec(v)

    @field_validator("mem_cap_mb")
    @classmethod
    def _caps(cls, v):
        vals = [v] if isinstance(v, (int, float)) else (v or [])
        if isinstance(v, list) and not v or any(not x > 0 for x in vals):
            raise ValueError(f"memory caps must be positive megabytes, got {v!r}")
        return v


class AdaptiveConfig(Strict):
    """Run-time re-balancing from measured stage times (allocator ``adaptive``)."""

    every: int = Field(3, ge=1, description="iterations between re-balances")
    max_rebalances: int = Field(3, ge=0)


class PipelineConfig(Strict):
    """One pipeline job: a model, devices, links and the allocators to run side by side."""

    job_name: str = "pipeline"
    output: str = "results/{job_name}-{start}.h5"
    seed: int = 0
    model: ModelConfig = ModelConfig()
    batch_size: int = Field(32, ge=1)
    micro_batches: int = Field(4, ge=1)
    iterations: int = Field(5, ge=1)
    warmup: int = Field(1, ge=0)
    lr: float = Field(0.01, gt=0.0)
    schedule: str = "gpipe"
    allocators: list[AllocatorEntry] = Field(
        [_ALLOCATOR_SECTION.validate_python("even"), _ALLOCATOR_SECTION.validate_python("optimal")],
        description="allocators run side by side, each a name or its section with its options, e.g. "
                    "[even, {name: sky-milp, time_limit_s: 60, solver: highs}]")
    compute: Literal["real", "emulated"] = "real"
    time_dilation: float = Field(1.0, ge=1.0)
    devices: DevicesConfig = DevicesConfig()
    link: LinkConfig = LinkConfig(bandwidth="1Gbit")
    """point-to-point links between stages (train's link section; trace_* keys are refused: constant rates)"""
    adaptive: AdaptiveConfig = AdaptiveConfig()
    device: Literal["cpu", "cuda", "auto"] = Field(
        "cpu", description="where each stage's layers run (real compute): cpu, cuda (one GPU per rank: the "
                           "node-local rank modulo the visible GPUs; exit 2 when none is visible) or auto; "
                           "activations and gradients go between stages through host memory over MPI")
    progress: bool = False
    chrome_trace: Union[bool, str] = Field(False, description=(
        "write a Chrome trace JSON (Perfetto, chrome://tracing) of every rank's forward/backward per "
        "micro-batch, waits, sends and optimizer steps: true for RUN.trace.json beside the HDF5 file, "
        "or a path"))

    @field_validator("chrome_trace")
    @classmethod
    def _trace_path(cls, v):
        from hpcbench.results.chrome_trace import check_trace_setting

        return check_trace_setting(v)

    @field_validator("schedule")
    @classmethod
    def _schedule(cls, v):
        return SCHEDULES.check(v)

    @model_validator(mode="before")
    @classmethod
    def _moved_keys(cls, data):
        for old, (allocator, option) in _MOVED.items():
            if isinstance(data, dict) and old in data:
                raise ValueError(f"{old}: {short_repr(data[old])}: this is an option of the {allocator} allocator "
                                 f"now, in its own section: allocators: [..., {{name: {allocator}, {option}: "
                                 f"{short_repr(data[old])}}}]")
        return data

    @field_validator("allocators")
    @classmethod
    def _allocators(cls, v):
        if not v:
            raise ValueError("give at least one allocator")
        return v

    @model_validator(mode="after")
    def _batches(self):
        if self.link.trace_index is not None:
            raise ValueError(f"link.trace_index: {self.link.trace_index}: the pipeline's links have a constant "
                             f"rate (link.bandwidth); trace replay is train's")
        if self.link.slow:
            raise ValueError(f"link.slow: {[e.model_dump() for e in self.link.slow]}: slow links are injected by "
                             f"the training runner's steps; the pipeline's links have a constant rate")
        if self.link.scope != "all":
            raise ValueError(f"link.scope: {self.link.scope!r}: the pipeline models every stage's link alike; "
                             f"the two-level link (between_hosts) is the training runner's")
        if self.batch_size % self.micro_batches:
            raise ValueError(f"batch_size ({self.batch_size}) must be a multiple of micro_batches "
                             f"({self.micro_batches})")
        return self


def flatten_keys() -> list[str]:
    """Every dotted key of :class:`PipelineConfig`."""
    return _config.flatten_keys(PipelineConfig)


def load_config(path=None, overrides=None) -> PipelineConfig:
    """Read and validate a pipeline job file; :class:`ConfigError` names the key and the value."""
    return _config.load_config(PipelineConfig, path, overrides)

"""Typed job configuration of ``python -m hpcbench.train`` (YAML, ``--dotted.key VALUE`` overrides).

Allowed names come from the registries: models from
:data:`hpcbench.train.models.MODELS`, synchronisers from
:func:`hpcbench.sync.names`, monitors from :data:`hpcbench.monitors.MONITORS`,
compressors from :mod:`hpcbench.compress.registry`, algorithms from
:mod:`hpcbench.collectives.algorithms`.
"""

from __future__ import annotations

from typing import Literal, Optional

from pydantic import Field, field_validator, model_validator

from hpcbench.collectives.link_config import LinkConfig
from hpcbench.runtime import config as _config
from hpcbench.runtime.config import ConfigError, Strict

__all__ = ["LinkConfig", "TrainConfig", "load_config", "flatten_keys", "ConfigError", "SCHEDULES"]

#: bucket schedules (:mod:`hpcbench.train.priority`)
SCHEDULES = ("fifo", "priority")


def _choose(kind: str, value: str, known) -> str:
    known = list(known)
    if value not in known:
        raise ValueError(f"unknown {kind} {value!r}; choose from {', '.join(known) or 'none registered'}")
    return value


class TrainConfig(Strict):
    """One training job: a model, its data, and the synchronisers to run side by side."""

    job_name: str = "train"
    output: str = "results/{job_name}-{start}.h5"
    seed: int = 0
    model: str = Field("resnet18", description="resnet18, resnet50, mobilenet_v2, vgg16, digits_mlp, digits_cnn")
    image_size: int = Field(224, ge=8, description="synthetic images are image_size x image_size (KungFu: 224)")
    batch_size: int = Field(32, ge=1, description="samples per worker per step")
    lr: float = Field(0.01, gt=0.0, description="SGD learning rate (KungFu: 0.01)")
    warmup: int = Field(10, ge=0, description="warm-up steps before each synchroniser's measurement")
    iterations: int = Field(10, ge=1, description="measured iterations (per monitor variant)")
    batches_per_iter: int = Field(10, ge=1, description="steps per iteration")
    sync: list[str] = Field(["ring"], description="synchronisers, run one after the other; NAME:SCHEDULE "
                                                 "(ring:priority, ring:fifo) overrides schedule for one entry")
    interleave_sync: bool = Field(False, description="run the synchronisers' iterations in turn (round robin), "
                                                     "so that drifts of the machine's load fall on all alike")
    bucket_mb: float = Field(25.0, gt=0.0, description="gradient bucket size in MiB (DDP's default 25)")
    overlap: bool = Field(True, description="start each bucket during backward (false: after backward)")
    schedule: Literal["fifo", "priority"] = Field(
        "fifo", description="fifo: buckets reduced as backward completes them, all before the optimizer step "
                            "(DDP); priority: one at a time, the bucket the next forward needs first, each "
                            "bucket's update just before its first use (ByteScheduler, P3)")
    algorithm: str = Field("auto", description="allreduce algorithm of sma")
    compressor: str = Field("none", description="compressor of the compressed synchroniser")
    compress_ratio: float = Field(0.01, gt=0.0, le=1.0)
    sma_alpha: float = Field(0.1, gt=0.0, le=1.0)
    monitors: list[str] = Field([], description="online monitors (hpcbench.monitors registry)")
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
    link: LinkConfig = LinkConfig()
    progress: bool = Field(True, description="tqdm bar on rank 0")

    @field_validator("model")
    @classmethod
    def _model(cls, v):
        from hpcbench.train.models import MODELS

        return _choose("model", v, MODELS)

    @field_validator("sync")
    @classmethod
    def _sync(cls, v):
        from hpcbench.sync import names

        if not v:
            raise ValueError("give at least one synchroniser")
        for s in v:
            base, _, sched = s.partition(":")
            _choose("synchroniser", base, names())
            if ":" in s and sched not in SCHEDULES:
                raise ValueError(f"synchroniser {s!r}: schedule {sched!r} is none of {', '.join(SCHEDULES)}")
        if len(set(v)) != len(v):
            raise ValueError(f"synchroniser listed twice in {v!r}")
        return v

    @field_validator("algorithm")
    @classmethod
    def _algorithm(cls, v):
        from hpcbench.collectives import algorithm_names

        return _choose("algorithm", v, [*algorithm_names(), "auto"])

    @field_validator("compressor")
    @classmethod
    def _compressor(cls, v):
        from hpcbench.compress.registry import names

        return _choose("compressor", v, names())

    @field_validator("monitors")
    @classmethod
    def _monitors(cls, v):
        from hpcbench.monitors import MONITORS

        for m in v:
            _choose("monitor", m, MONITORS)
        return v

    @model_validator(mode="after")
    def _consistent(self):
        from hpcbench.sync import get

        if self.compute == "real":
            if self.time_dilation != 1.0:
                raise ValueError(f"time_dilation: {self.time_dilation} needs compute: emulated (real compute "
                                 f"cannot be dilated)")
            if self.compute_time_s is not None:
                raise ValueError(f"compute_time_s: {self.compute_time_s} needs compute: emulated")
            if self.profile_file is not None:
                raise ValueError(f"profile_file: {self.profile_file!r} needs compute: emulated (real compute is "
                                 f"the model's own)")
        else:
            bad = [s for s, base, _ in self.sync_entries() if not get(base).emulates]
            if bad:
                raise ValueError(f"sync: {bad[0]!r} needs compute: real (it runs the real model)")
        prio = [(s, base) for s, base, sched in self.sync_entries() if sched == "priority"]
        if prio:
            if not self.overlap:
                raise ValueError("schedule: 'priority' needs overlap: true (buckets start during backward)")
            bad = [s for s, base in prio if not get(base).schedulable]
            if bad:
                raise ValueError(f"schedule: 'priority' needs synchronisers with an ordered start (hpcbench's "
                                 f"allreduce algorithms); sync {bad[0]!r} has none")
        if self.monitors:
            bad = [s for s, base, _ in self.sync_entries() if get(base).averages == "models"]
            if bad:
                raise ValueError(f"monitors: {self.monitors} need synchronised gradients; sync {bad[0]!r} "
                                 f"averages models")
        elif self.interleave_monitors:
            raise ValueError("interleave_monitors: true needs at least one entry in monitors")
        return self


    def sync_entries(self) -> list[tuple[str, str, str]]:
        """``(entry, synchroniser, schedule)`` of every ``sync`` entry: ``"ring:priority"`` gives
        ``("ring:priority", "ring", "priority")``, ``"ring"`` takes :attr:`schedule`."""
        out = []
        for s in self.sync:
            base, _, sched = s.partition(":")
            out.append((s, base, sched or self.schedule))
        return out


def flatten_keys() -> list[str]:
    """Every dotted key of :class:`TrainConfig`."""
    return _config.flatten_keys(TrainConfig)


def load_config(path=None, overrides=None) -> TrainConfig:
    """Read and validate a training job file; :class:`ConfigError` names the key and the value."""
    return _config.load_config(TrainConfig, path, overrides)

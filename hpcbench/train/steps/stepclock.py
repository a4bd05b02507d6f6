"""A modelled step clock (``step_clock: {kind: modelled}``): real training, each step's time priced by a model.

KungFu's figure 4 trains at 16 workers. On a machine with fewer cores than
workers, 16 real ranks still compute the real maths (the model, its
gradients, the GNS monitor, the policy's decisions, the allreduce of the real
bytes, the held-out accuracy: all exact and independent of the load), but
their *wall* step time measures how the ranks share the cores, not a
16-worker cluster. With ``step_clock: {kind: modelled}`` the runner keeps the
wall time (``steps.step_s``) and also records, per step, the time the step
would take on ``p`` workers with a core each (``steps.modelled_step_s``):

    modelled_step_s = predict_step(compute at the step's per-worker batch,
                                   the step's buckets, the synchroniser's alpha-beta price on p workers)

- The compute of one worker at per-worker batch ``B``
  (:meth:`ClockProfile.at`): forward, backward and optimizer times measured
  by rank 0 before training, alone, at each batch of ``profile_batches``
  (median of ``profile_steps`` steps each; or read from the ``clock_profile``
  and ``profile`` tables of an earlier result file, ``profile_file``, so that
  several runs share one measurement), interpolated linearly in ``B`` between them; beyond
  the measured range, forward and backward scale in proportion to ``B`` from
  the nearest measured batch and the optimizer is kept
  (:meth:`hpcbench.train.steps.profile.ComputeProfile.at_batch`).
- The communication: each gradient bucket's synchronisation priced by the
  synchroniser's cost model (:meth:`hpcbench.sync.base.Synchroniser.message_time`;
  for the allreduce algorithms :func:`hpcbench.collectives.cost.predict_allreduce`,
  which :func:`hpcbench.collectives.linkcost.predict_allreduce_links` equals
  on links that are all alike) over a link of ``latency_s`` and
  ``bandwidth`` on the step's worker count, serialised and overlapped with
  backward as :func:`hpcbench.train.synchronisation.predict.predict_step` does (``overlap``
  of the job; off: after backward, one after the other).
- The step takes as long as its slowest worker: the largest per-worker batch
  of the step prices the compute.

Not priced: the policies' and monitors' own work and the evaluation (the
wall clock keeps them), stragglers and load.

How this differs from KungFu's testbed, and why: KungFu's workers are GPUs,
which are under-used at small batches, so a larger batch costs little more
per step and growing the batch buys throughput. A CPU's compute grows
almost linearly with the batch: measured at several batches (rather than
scaled from one), the profile keeps the per-step overheads that make small
batches dearer per sample, and a larger batch saves only those overheads
and the fewer allreduces. The outcome is therefore that of a cluster of
these CPU cores on the priced link, not of KungFu's GPUs.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal, Optional

import numpy as np
from pydantic import Field, PositiveInt, field_validator

from hpcbench.runtime.config import Strict
from hpcbench.train.synchronisation.predict import link_cost, predict_step
from hpcbench.train.steps.profile import ComputeProfile

__all__ = ["StepClockConfig", "ClockProfile", "ModelledClock", "load_clock_profile"]


class StepClockConfig(Strict):
    """Which clock times the steps: ``measured`` (the wall clock, the default) or ``modelled`` (module docstring)."""

    kind: Literal["measured", "modelled"] = Field("measured", description="measured: steps.step_s only; modelled: "
                                                                          "also steps.modelled_step_s, the profiled "
                                                                          "compute plus the priced allreduce")
    profile_batches: list[PositiveInt] = Field([], description="modelled: per-worker batches rank 0 times the "
                                                               "compute at (default: batch_size)")
    profile_file: Optional[str] = Field(None, description="modelled: read the compute per batch from this earlier "
                                                          "result file's clock_profile table instead of timing it")
    latency_s: float = Field(50e-6, ge=0.0, le=3600.0, description="modelled: the priced link's latency (s)")
    bandwidth: str = Field("10Gbit", description="modelled: the priced link's bandwidth, e.g. 10Gbit, 1Gbit")

    @field_validator("bandwidth")
    @classmethod
    def _rate(cls, v):
        from hpcbench.collectives.linkmodel import parse_rate

        parse_rate(v)
        return v

    @field_validator("profile_batches")
    @classmethod
    def _distinct(cls, v):
        if len(set(v)) != len(v):
            raise ValueError(f"{v}: give each batch once")
        return sorted(v)

    def describe(self) -> str:
        """The priced link in words (the header; root attribute ``step_clock_link``)."""
        return f"latency {self.latency_s * 1e6:g} us, bandwidth {self.bandwidth}"


@dataclass(frozen=True)
class ClockProfile:
    """One worker's compute per step at several per-worker batches (seconds, measured alone on one core).

    Attributes
    ----------
    batches : numpy.ndarray of int64, shape (k,)
        Increasing per-worker batches.
    forward_s, backward_s, optimizer_s : numpy.ndarray of float64, shape (k,)
    base : hpcbench.train.steps.profile.ComputeProfile
        The run's profile: its gradients' ready times (a share of backward) shape each batch's timeline.
    source : str
        ``"measured"`` or ``"file"``.
    """

    batches: np.ndarray
    forward_s: np.ndarray
    backward_s: np.ndarray
    optimizer_s: np.ndarray
    base: ComputeProfile
    source: str = "measured"

    def at(self, batch: int) -> ComputeProfile:
        """The compute at per-worker ``batch``: interpolated between measured batches, scaled beyond them."""
        b, x = self.batches, float(batch)
        if x < b[0] or x > b[-1]:
            j = 0 if x < b[0] else len(b) - 1
            k = x / b[j]
            f, bw, o = self.forward_s[j] * k, self.backward_s[j] * k, self.optimizer_s[j]
        else:
            f, bw, o = (float(np.interp(x, b, a)) for a in (self.forward_s, self.backward_s, self.optimizer_s))
        base = self.base
        share = bw / base.backward_s if base.backward_s > 0 else 0.0
        return ComputeProfile(float(f), float(bw), float(o), base.param_ready_s * share, base.numels, "modelled",
                              base.param_need_s * (f / base.forward_s if base.forward_s > 0 else 0.0), base.device,
                              base.copy_s, base.scale_s, base.axpy_s)

    def rows(self) -> dict:
        """The ``clock_profile`` table's columns."""
        return dict(batch=[int(b) for b in self.batches], forward_s=list(map(float, self.forward_s)),
                    backward_s=list(map(float, self.backward_s)), optimizer_s=list(map(float, self.optimizer_s)))


def load_clock_profile(path, model: str) -> ClockProfile:
    """The ``clock_profile`` table of an earlier modelled-clock run of ``model``, with that run's profile as the
    gradients' timeline (:func:`hpcbench.train.steps.profile.load_profile`): runs that read one file price alike.

    Raises
    ------
    OSError
        The file cannot be read.
    KeyError, ValueError
        It is not a training result of ``model`` with a clock profile.
    """
    from hpcbench.results import read_attrs, read_table
    from hpcbench.train.steps.profile import load_profile

    attrs = read_attrs(path)
    if attrs.get("kind") != "train" or attrs.get("model") != model:
        raise ValueError(f"a {attrs.get('kind')!r} result of model {attrs.get('model')!r}; the job trains {model!r}")
    t = read_table(path, "clock_profile")
    if not len(t["batch"]):
        raise ValueError("its clock_profile table is empty")
    return ClockProfile(np.asarray(t["batch"], dtype=np.int64), np.asarray(t["forward_s"], dtype=np.float64),
                        np.asarray(t["backward_s"], dtype=np.float64), np.asarray(t["optimizer_s"], dtype=np.float64),
                        load_profile(path, model), "file")


class ModelledClock:
    """Prices one step (rank 0's report calls :meth:`step_s` per step; module docstring).

    Parameters
    ----------
    profile : ClockProfile
    plan : hpcbench.train.synchronisation.buckets.BucketPlan
        The gradient buckets (their bytes and parameters).
    alpha_s, beta_s_per_byte : float
        The priced link.
    overlap : bool
        Buckets start as backward completes them (False: after backward).
    """

    def __init__(self, profile: ClockProfile, plan, alpha_s: float, beta_s_per_byte: float, overlap: bool) -> None:
        self.profile, self.plan = profile, plan
        self.alpha_s, self.beta = alpha_s, beta_s_per_byte
        self.overlap = overlap
        self._cache: dict = {}

    def step_s(self, sync, batch_sizes) -> float:
        """Modelled seconds of a step of ``sync`` in which worker ``r`` trains ``batch_sizes[r]`` samples (NaN:
        a synchroniser without a cost model; one worker: the compute alone).

        Parameters
        ----------
        sync : hpcbench.sync.base.Synchroniser
            The active synchroniser (its own config prices it, e.g. SMA's algorithm).
        batch_sizes : sequence of int, length p
            Every worker's samples in the step; the largest prices the compute.
        """
        p, batch = len(batch_sizes), int(max(batch_sizes))
        key = (id(sync), getattr(sync.config, "algorithm", None), p, batch)
        if key not in self._cache:
            prof = self.profile.at(batch)
            ready = (self.plan.ready_times(prof.param_ready_s) if self.overlap
                     else np.full(len(self.plan.buckets), prof.backward_s))
            cost = link_cost(sync, p, self.alpha_s, self.beta)
            if p == 1:
                cost = (lambda nbytes: 0.0)
            step = (predict_step(prof, self.plan.nbytes, ready, cost, sync.averages, mix_s=sync.mix_memory_s(prof))[0]
                    if cost else math.nan)
            self._cache[key] = step
        return self._cache[key]

"""``stellatrain``: StellaTrain's controller as a policy: per-worker batch sizes and the compression ratio.

StellaTrain (Lim et al., SIGCOMM'24; ``backend/src/engine/batch_rate_alloc.py``,
``batch_rate_alloc_optim.py``) runs a central controller fed by every
worker's per-step telemetry; it estimates the bandwidth, fits each worker's
throughput, chooses integer batch sizes that balance the workers' step times
and the least compression rate whose bytes fit the estimate, and its
decisions take effect a fixed number of steps later on every worker. Here
the controller is :class:`hpcbench.controller.Controller` and this policy
connects it (StellaTrain's public engine never starts its telemetry client,
so its controller is not connected there):

- on rank 0 (``agreement: root``; the other ranks return nothing and get
  rank 0's decision from the runner), ``after_step`` gives the controller
  every rank's :class:`~hpcbench.telemetry.TelemetryRecord` of the step
  (``Telemetry.records()``, gathered by the runner with the step's numbers);
- a controller decision becomes a :class:`~hpcbench.policies.decision.Decision`
  of ``batch_size`` (one per worker, rank order) and ``compress_ratio`` (the
  fraction kept, ``1 - compression_rate``) at ``at_step =
  effective_step`` (the most advanced worker's step + 3), applied before that
  step on every rank, with the controller's record as its ``detail`` (the
  ``controller`` table);
- ``before_train`` sets the starting ratio (``initial_ratio``) from step 0;
- ``scale_lr: true`` sets the learning rate with each decision to the
  starting one times the global batch over the starting global batch (the
  linear scaling rule, Goyal et al. 2017, as ``gns_batch``'s). StellaTrain
  does not: its CPU optimizer keeps the user's learning rate and averages
  the workers' gradients (``modules/cpu_optimize.cpp``) whatever the batch
  sizes the controller chose; hence off by default;
- ``estimator``: a name or a section with the estimator's own options:
  ``delivered`` (default; :class:`hpcbench.controller.DeliveredBandwidthEstimator`,
  the link's rate while busy, read from the transfers' own seconds on the
  wire; ``window``) or ``stellatrain`` (its 100 ms-bin meter and wait rule,
  which read far below the link with hpcbench's few whole-bucket messages;
  ``reading``).

With the runner's links modelled between hosts only (``link.scope:
between_hosts``) the estimate is that link's, the slow level: a message
inside a host is metered with no time on the wire
(:class:`hpcbench.collectives.linkmodel.LinkTransport`), and the sparse
ring allgather's every step crosses hosts, so the rate search's bytes over
the estimate are its time (docs/stellatrain.md, "The bandwidth estimate").

The gradient messages the rate search counts are the runner's buckets
(``PolicyContext.message_elements``): one message per bucket where
StellaTrain sends one per parameter tensor (hpcbench's compressed
synchroniser compresses and sends whole buckets).
"""

from __future__ import annotations

from typing import Any, Union

import numpy as np
from pydantic import Field, PositiveInt, field_validator, model_validator

from hpcbench.policies.base import Policy, PolicyConfig, PolicyContext
from hpcbench.policies.decision import Decision
from hpcbench.runtime.config import section_options, short_repr, validate_section

__all__ = ["StellaTrain"]


class StellaTrain(Policy):
    """StellaTrain's controller: per-worker batch sizes and the compression ratio from telemetry."""

    class Config(PolicyConfig):
        """Bounds and options of the controller."""

        max_batch: Union[PositiveInt, list[PositiveInt]] = Field(
            64, description="largest batch of each worker: one for all, or a list cycled over the ranks "
                            "(StellaTrain: per GPU model)")
        min_batch: PositiveInt = Field(1, description="smallest batch of any worker")
        initial_ratio: float = Field(0.01, gt=0.0, le=1.0, description="fraction of gradient elements kept from "
                                                                      "step 0 until the first rate decision")
        solver: str = Field("exact", description="batch solver: exact or nelder-mead (hpcbench.controller "
                                                 "BATCH_SOLVERS; both without StellaTrain's learned penalty)")
        estimator: Any = Field("delivered", validate_default=True, description=(
            "bandwidth estimator (hpcbench.controller ESTIMATORS), a name or its section {name: NAME, ...its "
            "options}: delivered (bytes over the transfers' seconds on the wire, median of `window` steps, 5) or "
            "stellatrain (its meter and wait rule; `reading`: peak, the busiest 100 ms bin, or mean, 1 s)"))
        effective_after: PositiveInt = Field(3, description="a decision applies from the most advanced worker's "
                                                            "step plus this (StellaTrain: 3)")
        scale_lr: bool = Field(False, description="learning rate x global batch / starting global batch with every "
                                                  "batch decision (linear scaling, Goyal et al. 2017; StellaTrain: "
                                                  "off, a fixed learning rate)")
        reoptimise_every: PositiveInt = Field(100, description="running decisions between batch optimisations "
                                                               "(StellaTrain: 100)")

        @model_validator(mode="before")
        @classmethod
        def _moved_keys(cls, data):
            if isinstance(data, dict) and "reading" in data:
                raise ValueError(f"reading: {short_repr(data['reading'])}: an option of the stellatrain estimator "
                                 f"now, in its section: estimator: {{name: stellatrain, reading: "
                                 f"{short_repr(data['reading'])}}}")
            return data

        @model_validator(mode="after")
        def _bounds(self):
            upper = min(self.max_batch) if isinstance(self.max_batch, list) else self.max_batch
            if self.min_batch > upper:
                raise ValueError(f"min_batch {self.min_batch} exceeds max_batch {upper} (the smallest of "
                                 f"{self.max_batch}): no batch fits both; lower min_batch or raise max_batch")
            return self

        @field_validator("estimator")
        @classmethod
        def _estimator(cls, v):
            from hpcbench.controller.estimators import ESTIMATOR_SECTION     # the controller imports scipy: later

            return validate_section(ESTIMATOR_SECTION, v, "estimator")

        @field_validator("solver")
        @classmethod
        def _solver(cls, v):
            from hpcbench.controller.batch import BATCH_SOLVERS

            return BATCH_SOLVERS.check(v)

    name = "stellatrain"
    decides = frozenset({"batch_size", "compress_ratio", "learning_rate"})
    agreement = "root"
    needs_telemetry = True
    detail_table = "controller"

    def __init__(self, config=None) -> None:
        super().__init__(config)
        self.controller = None
        self.base_lr = self.base_batch = None

    @classmethod
    def detail_type(cls):
        from hpcbench.controller import Decision as ControllerDecision

        return ControllerDecision

    def before_train(self, ctx: PolicyContext):
        if ctx.rank != 0:
            return None
        from dataclasses import replace

        from hpcbench.controller import ESTIMATORS, STELLATRAIN_TIMING, Controller, WireModel

        c = self.config
        p = ctx.world_size
        upper = np.resize(np.asarray(c.max_batch if isinstance(c.max_batch, list) else [c.max_batch]), p)
        lower = np.minimum(c.min_batch, upper)
        start = np.clip(np.asarray(ctx.batch_sizes), lower, upper)
        self.base_lr, self.base_batch = ctx.learning_rate, int(np.sum(ctx.batch_sizes))
        timing = replace(STELLATRAIN_TIMING, effective_after=c.effective_after, reoptimise_every=c.reoptimise_every)
        wire = WireModel(tuple(ctx.message_elements) or (1,))
        estimator = ESTIMATORS[c.estimator.name](**section_options(c.estimator))
        self.controller = Controller(wire, upper.tolist(), start.tolist(), 1.0 - c.initial_ratio, lower=lower.tolist(),
                                     solver=c.solver, timing=timing, estimator=estimator)
        return Decision(compress_ratio=c.initial_ratio, reason="initial compression ratio")

    def after_step(self, ctx: PolicyContext, telemetry):
        if self.controller is None:
            return None
        d = self.controller.observe(telemetry.records())
        if d is None:
            return None
        est = "" if d.estimate_bps != d.estimate_bps else f", estimate {d.estimate_bps / 1e6:.1f} Mbit/s"
        lr = self.base_lr * sum(d.batches) / self.base_batch if self.config.scale_lr else None
        return Decision(batch_size=d.batches, compress_ratio=max(float(d.compress_ratio), 1e-6), learning_rate=lr,
                        at_step=d.effective_step, reason=f"{d.phase}{est}", detail=d)

"""``sync_switch``: change the synchroniser once, at a fixed step or when a monitored value crosses a threshold.

KungFu's ``AdaptiveSGDOptimizer`` (``srcs/python/kungfu/tensorflow/
optimizers/ada_sgd.py``) trains with synchronous model averaging (SMA, its
``_sma``: ``v <- (1 - alpha) v + alpha mean(v)``, ``alpha = 0.1``) while
``global_step < change_step`` and with synchronous SGD (``_ssgd``: averaged
gradients) from then on; its ``AdaSGDHook`` broadcasts every variable from
rank 0 after the step at which ``global_step == change_step``, so the
replicas, which SMA let drift apart, continue as one model. Its only rule is
the fixed step.

hpcbench: ``at_step: K`` is that rule (the job's first ``sync`` entry, e.g.
``{name: sma, alpha: 0.1}``, until step ``K - 1``; ``to`` from step ``K``);
the training runner's ``sync`` applier completes the step in flight and
broadcasts rank 0's model before the first step of the new synchroniser
(``train/adaptation/decisions.py``), as ``AdaSGDHook`` does. hpcbench adds a second
rule, ``signal``/``threshold``: switch after ``patience`` consecutive
observed steps on which the signal is below (or above) the threshold. The
signal is a monitor output (``variance_trace_grad_variance``: the trace of
the gradient covariance, cheap enough to observe every step) or a per-rank
telemetry field (``loss``, ``step_s``...: the mean over ranks).

Monitors observe only synchronisers that average gradients (hpcbench's SMA
never forms the averaged gradient), so a monitor signal serves switches from
a gradient synchroniser (e.g. compressed or ring to another); from SMA the
signal is a telemetry field such as the training loss. Decisions are rank
0's (``agreement: root``): it reads every rank's telemetry, which the loop
gathers to rank 0 anyway.
"""

from __future__ import annotations

import math
from typing import Any, Literal, Optional, Union

from pydantic import Field, NonNegativeInt, PositiveInt, model_validator

from hpcbench.policies.base import Policy, PolicyConfig, PolicyContext
from hpcbench.policies.decision import Decision

__all__ = ["SyncSwitch"]


class SyncSwitch(Policy):
    """Switch the synchroniser to ``to`` once: before step ``at_step`` (KungFu's AdaSGD) or when ``signal``
    crosses ``threshold`` (hpcbench's; module docstring)."""

    class Config(PolicyConfig):
        """KungFu's change_step, or a signal crossing a threshold; the synchroniser to switch to."""

        to: Union[str, dict[str, Any]] = Field("ring", description="the synchroniser from the switch on: a name "
                                                                   "or a sync section (KungFu: S-SGD)")
        at_step: Optional[NonNegativeInt] = Field(None, description="switch before this step (KungFu's "
                                                                    "change_step)")
        signal: Optional[str] = Field(None, description="or switch when this monitor output (e.g. "
                                                        "variance_trace_grad_variance) or telemetry field (loss, "
                                                        "mean over ranks) crosses threshold")
        threshold: Optional[float] = Field(None, description="the signal's threshold")
        when: Literal["below", "above"] = Field("below", description="switch when the signal is below or "
                                                                     "above the threshold")
        patience: PositiveInt = Field(1, description="consecutive observed steps beyond the threshold")

        @model_validator(mode="after")
        def _one_rule(self):
            if (self.at_step is None) == (self.signal is None):
                raise ValueError("at_step: give at_step (a step) or signal and threshold, one of them")
            if self.signal is not None and (self.threshold is None or not math.isfinite(self.threshold)):
                raise ValueError(f"threshold: {self.threshold!r}: signal {self.signal!r} needs a finite threshold")
            return self

        def monitor_columns(self) -> tuple[str, ...]:
            return (self.signal,) if self.signal is not None else ()

        def sync_sections(self) -> tuple:
            return (self.to,)

    name = "sync_switch"
    decides = frozenset({"sync"})
    agreement = "root"

    def __init__(self, config=None) -> None:
        super().__init__(config)
        self.done = False
        self.run = 0        # consecutive observed steps beyond the threshold

    def before_train(self, ctx: PolicyContext) -> Decision | None:
        at = self.config.at_step
        if at is None:
            return None
        self.done = True
        return Decision(sync=self.config.to, at_step=at, reason=f"sync_switch: step {at} (change_step)")

    def after_step(self, ctx: PolicyContext, telemetry) -> Decision | None:
        c = self.config
        if self.done or c.signal is None or ctx.rank != 0:
            return None
        value = self.signal(telemetry)
        if not math.isfinite(value):
            return None     # not observed this step: the count neither grows nor resets
        beyond = value < c.threshold if c.when == "below" else value > c.threshold
        self.run = self.run + 1 if beyond else 0
        if self.run < c.patience:
            return None
        self.done = True
        return Decision(sync=c.to, reason=f"sync_switch: {c.signal} {value:.4g} {c.when} {c.threshold:.4g} for "
                                          f"{self.run} observed step(s)")

    def signal(self, telemetry) -> float:
        """The signal's value at this step: a telemetry field's mean over ranks (rank 0 has every rank's), or a
        monitor output (NaN when the monitor did not observe the step)."""
        name = self.config.signal
        if name in telemetry.fields:
            return float(telemetry.column(name).mean())
        return float(telemetry.monitors.get(name, math.nan))

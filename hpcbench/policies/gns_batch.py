"""``gns_batch``: the batch size follows the gradient noise scale (KungFu's figure 4).

KungFu (Mai et al., OSDI'20, figure 4) grows the batch while ResNet trains,
driven by the gradient noise scale that its ``MonitorGradientNoiseScaleOptimizer``
measures (hpcbench's ``gns`` monitor, output ``gns_b_simple``). Two rules of
KungFu's code are offered:

``rule: ratio`` (the artifact's ``KungfuChangeBatchSizeHook``, luomai/models
branch ``osdi20``, ``kungfu_experiment/kungfu_policy.py``)
    After every step, ``ratio = |GNS| / batch`` (``batch``: the per-worker
    batch) enters an exponential moving average with KungFu's ``EMA(0.9, 2)``:
    ``v <- 0.9 v + 0.1 x`` (0.9 weighs the *old* value) where ``x`` is first
    capped to ``[v / 2, 2 v]``. At the end of each cycle (KungFu: each
    ``estimator.train`` call; hpcbench: each epoch, or every ``cycle_steps``
    steps) the EMA is recorded, and from the second cycle on
    ``scale = latest / first`` clamped to ``[1, 2]`` and
    ``batch = min(max_batch, int(batch * scale))``; start 32, max 1024.

``rule: epoch_doubling`` (KungFu's ``GNSPolicy``, a policy on ``kungfu.tensorflow.policy.BasePolicy``)
    The same capped EMA of ``|GNS| / batch`` after every step; after each
    epoch the EMA is all-reduced over workers and, when it rose since the
    previous epoch, the batch doubles: ``batch = min(2 batch, 1024)``.

Where hpcbench differs, and why:

- KungFu all-reduces the EMA because each worker's policy reads its own
  monitor value; hpcbench's monitors return the same value on every rank
  (``Monitor`` contract), so every rank's EMA is the same and the sum over
  ``n`` workers is ``n`` times it: comparing sums (KungFu) and comparing
  values (here) decide the same. No collective is needed and the decision
  is checked for agreement (``agreement: consensus``).
- The batch is capped also by the data: at most ``epoch_size // workers``
  per worker (a step never sees a sample twice; the digits have 1,347).
- ``scale_lr: true`` scales the learning rate linearly with the batch
  (Goyal et al. 2017: ``lr = lr_0 * batch / start``); KungFu's policies keep
  the learning rate.
- Steps where the monitor did not observe (``monitor_interval`` > 1) or
  where ``B_simple`` is not yet defined (NaN until the GNS averages are
  positive) leave the EMA as it is.
"""

from __future__ import annotations

import math
from typing import Literal, Optional

from pydantic import Field, PositiveInt, model_validator

from hpcbench.policies.base import Policy, PolicyConfig, PolicyContext
from hpcbench.policies.decision import Decision

__all__ = ["GnsBatch", "CappedEMA"]

#: KungFu's bounds of one cycle's batch scale (``_normalize_bs_scale``)
SCALE_MIN, SCALE_MAX = 1.0, 2.0


class CappedEMA:
    """KungFu's policy EMA (``kungfu.utils.EMA(alpha, scale_cap)``): seeded with the first value, then each new
    value is capped to ``[v / cap, v * cap]`` and ``v <- alpha v + (1 - alpha) x``.

    Note the convention: here ``alpha`` weighs the *old* value (KungFu's Python
    ``EMA``), unlike the GNS monitor's ``alpha`` (KungFu's C++ ``ema.hpp``,
    weight of the new value).

    Parameters
    ----------
    alpha : float
        Weight of the previous average, in [0, 1).
    cap : float
        Largest factor by which one value may exceed (or fall short of) the average, > 1.
    """

    __slots__ = ("alpha", "cap", "value")

    def __init__(self, alpha: float, cap: float) -> None:
        self.alpha, self.cap = alpha, cap
        self.value: float | None = None

    def update(self, x: float) -> float:
        """Add ``x``; returns the new average."""
        if self.value is None:
            self.value = x
        else:
            x = min(max(x, self.value / self.cap), self.value * self.cap)
            self.value = self.alpha * self.value + (1.0 - self.alpha) * x
        return self.value


class GnsBatch(Policy):
    """Per-worker batch size driven by the gradient noise scale (module docstring: KungFu's two rules).

    Needs the ``gns`` monitor (its output ``gns_b_simple`` is the default
    ``signal``). Decisions: ``batch_size`` (and ``learning_rate`` with
    ``scale_lr``), the same on every rank (``agreement: consensus``): the
    start batch before step 0, then at the end of cycles or epochs.
    """

    class Config(PolicyConfig):
        """KungFu's AE rule (ratio) or its GNSPolicy (epoch_doubling); batches are per worker."""

        rule: Literal["ratio", "epoch_doubling"] = Field(
            "ratio", description="ratio: batch x (latest / first cycle's EMA of |GNS|/batch), scale in [1, 2] "
                                 "(KungFu's artifact); epoch_doubling: double when the EMA rose over the epoch "
                                 "(KungFu's GNSPolicy)")
        start: PositiveInt = Field(32, description="per-worker batch from step 0 (KungFu: 32)")
        max_batch: PositiveInt = Field(1024, description="largest per-worker batch (KungFu: 1024; also at most "
                                                         "epoch_size // workers)")
        alpha: float = Field(0.9, ge=0.0, lt=1.0, description="EMA weight of the old value (KungFu: 0.9)")
        cap: float = Field(2.0, gt=1.0, description="one step's value is capped to [ema / cap, ema * cap] "
                                                    "(KungFu: 2)")
        cycle_steps: Optional[PositiveInt] = Field(None, description="ratio rule: steps per cycle (default: a "
                                                                     "cycle is an epoch)")
        signal: str = Field("gns_gns_b_simple", description="the monitor column read as the GNS")
        scale_lr: bool = Field(False, description="learning rate x batch / start (linear scaling; KungFu: off)")

        @model_validator(mode="after")
        def _consistent(self):
            if self.start > self.max_batch:
                raise ValueError(f"start: {self.start} is larger than max_batch {self.max_batch}")
            if self.cycle_steps is not None and self.rule != "ratio":
                raise ValueError(f"cycle_steps: {self.cycle_steps} is for rule: ratio (epoch_doubling acts "
                                 f"after each epoch)")
            return self

        def needs_epochs(self) -> bool:
            return self.rule == "epoch_doubling" or self.cycle_steps is None

        def monitor_columns(self) -> tuple[str, ...]:
            return (self.signal,)

    name = "gns_batch"
    decides = frozenset({"batch_size", "learning_rate"})
    agreement = "consensus"

    def __init__(self, config=None) -> None:
        super().__init__(config)
        c = self.config
        self.ema = CappedEMA(c.alpha, c.cap)
        #: the EMA at the end of each cycle (ratio) or the previous epoch's (epoch_doubling)
        self.history: list[float] = []
        self.base_lr: float | None = None

    def before_train(self, ctx: PolicyContext) -> Decision:
        self.base_lr = ctx.learning_rate
        return self._decide(ctx, self._limit(ctx, self.config.start), "start")

    def after_step(self, ctx: PolicyContext, telemetry) -> Decision | None:
        gns = telemetry.monitors.get(self.config.signal, math.nan)
        if math.isfinite(gns):
            self.ema.update(abs(gns) / (telemetry.global_batch / len(telemetry.batch_sizes)))
        c = self.config
        if c.rule == "ratio" and c.cycle_steps is not None and (ctx.step + 1) % c.cycle_steps == 0:
            return self._cycle(ctx)
        return None

    def after_epoch(self, ctx: PolicyContext) -> Decision | None:
        if self.config.rule == "epoch_doubling":
            return self._doubling(ctx)
        if self.config.cycle_steps is None:
            return self._cycle(ctx)
        return None

    def _cycle(self, ctx: PolicyContext) -> Decision | None:
        """KungFu's artifact: ``scale = latest / first`` cycle's EMA, clamped to [1, 2]."""
        if self.ema.value is None:
            return None
        self.history.append(self.ema.value)
        if len(self.history) < 2:
            return None
        scale = min(max(self.history[-1] / self.history[0], SCALE_MIN), SCALE_MAX)
        bs = ctx.batch_sizes[0]
        new = self._limit(ctx, int(bs * scale))
        return self._decide(ctx, new, f"cycle {len(self.history)}: ema {self.history[-1]:.4g} / first "
                                      f"{self.history[0]:.4g}, scale {scale:.3f}")

    def _doubling(self, ctx: PolicyContext) -> Decision | None:
        """KungFu's GNSPolicy: double when the EMA rose since the previous epoch."""
        if self.ema.value is None:
            return None
        prev = self.history[-1] if self.history else None
        self.history.append(self.ema.value)
        if prev is None or not self.ema.value > prev:
            return None
        new = self._limit(ctx, 2 * ctx.batch_sizes[0])
        return self._decide(ctx, new, f"epoch {ctx.epoch}: ema {self.ema.value:.4g} > {prev:.4g}")

    def _limit(self, ctx: PolicyContext, batch: int) -> int:
        """``batch`` capped by ``max_batch`` and by the data (``epoch_size // workers``)."""
        limit = self.config.max_batch
        if ctx.epoch_size is not None:
            limit = min(limit, max(1, ctx.epoch_size // ctx.world_size))
        return max(1, min(limit, batch))

    def _decide(self, ctx: PolicyContext, batch: int, why: str) -> Decision | None:
        """The decision to use per-worker ``batch`` (None when it is the batch now, except before step 0)."""
        if ctx.step >= 0 and all(b == batch for b in ctx.batch_sizes):
            return None
        lr = self.base_lr * batch / self.config.start if self.config.scale_lr else None
        return Decision(batch_size=batch, learning_rate=lr, reason=f"gns_batch {self.config.rule}: {why}")

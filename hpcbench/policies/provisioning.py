"""``provisioning``: add workers one at a time while each one pays for itself (KungFu's figure 6).

KungFu's scaling policy (``ScalingPolicy`` / ``ScalingHook``, the
``scaling.py`` of its policy experiments, since removed from the
repository; figure 6 of the OSDI'20 paper) runs on rank 0 and, after every
step, stores the step's throughput in a window of ``change_step`` slots;
every ``change_step`` steps it takes the mean of the window's second half
times the worker count as the cluster's throughput ``T(N)`` (the first half
is the transient after the last change) and

- if ``T(N) < (1 + alpha / N) T(N - 1)`` (with ``T(0) = 0``): the last
  worker added did not pay for itself: remove it, and stop scaling;
- else add one worker, or stop scaling when none is left to add.

Its hook's defaults: ``change_step = 100``, ``alpha = 0.33``.

hpcbench keeps the rule and the window and differs in how the throughput is
measured: KungFu divides its per-worker batch by the time since
``before_train`` (``_start_time`` is set there only), so its "throughput"
of a step is the batch over the whole elapsed run; hpcbench takes each
step's total samples per second, ``global_batch / step time`` (the slowest
rank's ``step_s``), which is what the rule compares. The window's second
half is averaged as KungFu does (``change_step // 2`` on). Workers are the
elastic warm pool's (``elastic:`` section; ``batch: keep_local`` keeps
each worker's batch as KungFu's workers do, ``keep_global`` splits the same
global batch); the largest count is the ranks started
(``PolicyContext.max_workers``) or ``max_workers``. Decisions are rank
0's, as KungFu's (``agreement: root``: rank 0 has every rank's step time).
"""

from __future__ import annotations

from typing import Optional

import numpy as np
from pydantic import Field, PositiveInt

from hpcbench.policies.base import Policy, PolicyConfig, PolicyContext
from hpcbench.policies.decision import Decision

__all__ = ["Provisioning"]


class Provisioning(Policy):
    """KungFu's throughput rule: every ``change_step`` steps keep the last worker added only if
    ``T(N) >= (1 + alpha / N) T(N - 1)``, else remove it and stop; otherwise add one (module docstring)."""

    class Config(PolicyConfig):
        """KungFu's change_step and alpha; an optional cap on the worker count."""

        change_step: PositiveInt = Field(100, ge=2, description="steps between decisions (KungFu: 100); the "
                                                                "mean of the second half is T(N)")
        alpha: float = Field(0.33, ge=0.0, le=100.0, description="a worker must add at least alpha / N of "
                                                                 "T(N - 1) (KungFu: 0.33)")
        max_workers: Optional[PositiveInt] = Field(None, description="stop adding at this count (default: "
                                                                     "the ranks started)")

    name = "provisioning"
    decides = frozenset({"workers"})
    agreement = "root"

    def __init__(self, config=None) -> None:
        super().__init__(config)
        self.window: list[float] = []           # this block's throughputs, samples/s
        self.throughput: dict[int, float] = {}  # T(N), samples/s
        self.stopped = False

    def after_step(self, ctx: PolicyContext, telemetry) -> Decision | None:
        if self.stopped or ctx.rank != 0:
            return None
        self.window.append(telemetry.global_batch / float(np.max(telemetry.column("step_s"))))
        c = self.config
        if len(self.window) < c.change_step:
            return None
        n = ctx.world_size
        t_n = float(np.mean(self.window[c.change_step // 2:]))
        self.window = []
        self.throughput[n] = t_n
        prev = self.throughput.get(n - 1, 0.0)
        need = (1.0 + c.alpha / n) * prev
        if t_n < need:
            self.stopped = True
            return Decision(workers=n - 1, reason=f"provisioning: T({n}) = {t_n:.1f}/s < (1 + {c.alpha:g}/{n}) "
                                                  f"T({n - 1}) = {need:.1f}/s: remove the last worker, stop")
        caps = [x for x in (c.max_workers, ctx.max_workers) if x is not None]
        if n >= (min(caps) if caps else n):
            self.stopped = True
            return None
        return Decision(workers=n + 1, reason=f"provisioning: T({n}) = {t_n:.1f}/s >= (1 + {c.alpha:g}/{n}) "
                                              f"T({n - 1}) = {need:.1f}/s: add a worker")

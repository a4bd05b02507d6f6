"""Which step comes next: decided step by step, when the step is about to start.

The loop asks its plan for each step (:meth:`MeasuredPlan.next`) instead of
walking a list fixed in advance, so a plan may read the run's context (the
samples trained, the batch size a policy set) to decide what comes next or
to stop. :class:`MeasuredPlan` is KungFu's benchmark recipe
(``benchmarks/system/benchmark_kungfu.py``): warm-up steps, then measured
iterations of ``batches_per_iter`` steps, cycling through the monitor
variants of :class:`hpcbench.train.hooks.MonitorHook`.
"""

from __future__ import annotations

from hpcbench.train.context import StepInfo

__all__ = ["MeasuredPlan"]


class MeasuredPlan:
    """Warm-up, then ``iterations`` measured iterations per variant of ``batches_per_iter`` steps each.

    Parameters
    ----------
    warmup : int
        Warm-up steps (iteration -1, the first variant).
    iterations : int
        Measured iterations per variant.
    batches_per_iter : int
        Steps per iteration.
    variants : sequence of str
        Variant names; iteration ``i`` runs ``variants[i % len(variants)]``.
    """

    def __init__(self, warmup: int, iterations: int, batches_per_iter: int, variants) -> None:
        self.warmup, self.batches_per_iter = warmup, batches_per_iter
        self.variants = list(variants)
        self.iterations = iterations * len(self.variants)

    @property
    def total_steps(self) -> int:
        """Warm-up plus measured steps."""
        return self.warmup + self.iterations * self.batches_per_iter

    def next(self, ctx) -> StepInfo | None:
        """The step after ``ctx.info`` (the first when it is None), or None when the plan is done."""
        t = 0 if ctx.info is None else ctx.info.step + 1
        if t >= self.total_steps:
            return None
        if t < self.warmup:
            return StepInfo(t, -1, self.variants[0], t + 1 == self.warmup)
        it, k = divmod(t - self.warmup, self.batches_per_iter)
        return StepInfo(t, it, self.variants[it % len(self.variants)], k + 1 == self.batches_per_iter)

"""Which step comes next: decided step by step, when the step is about to start.

The loop asks its plan for each step (:meth:`MeasuredPlan.next`) instead of
walking a list fixed in advance, so a plan may read the run's context (the
samples trained, the batch size a policy set) to decide what comes next or
to stop. :class:`MeasuredPlan` is KungFu's benchmark recipe
(``benchmarks/system/benchmark_kungfu.py``): warm-up steps, then measured
iterations of ``batches_per_iter`` steps, taking the monitor variants of
:class:`hpcbench.train.steps.hooks.MonitorHook` in turn. The turns follow the
rounds of a Williams design (:func:`hpcbench.runtime.interleave.balanced_orders`),
as ``interleave_sync`` does for synchronisers: under plain round robin
(none, gns, variance, none, ...) ``gns`` would always follow ``none`` and
be measured with whatever ``none`` leaves behind, and the warm-up would run
into a measured iteration of its own variant.
"""

from __future__ import annotations

from hpcbench.runtime.interleave import balanced_orders
from hpcbench.train.steps.context import StepInfo

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
        Variant names. Measured iteration ``i`` runs ``order[i % len(order)]``,
        ``order`` being the design's rounds one after the other (each round
        runs every variant once, so each runs ``iterations`` iterations; the
        design is complete when ``iterations`` is a multiple of its rounds:
        1 for one or two variants, ``n`` for an even ``n``, ``2 n`` for an odd
        one). The warm-up steps take the last turns of a pass, one step each
        (with as many warm-up steps as variants: the last round), so that
        every variant pays its first-use costs (a monitor's buffers) before it
        is measured; the last of them is not the variant the first round
        starts with.

    Attributes
    ----------
    order : list of str
        The variants of one pass through the design's rounds.
    """

    def __init__(self, warmup: int, iterations: int, batches_per_iter: int, variants) -> None:
        self.warmup, self.batches_per_iter = warmup, batches_per_iter
        self.variants = list(variants)
        self.order = [self.variants[i] for r in balanced_orders(len(self.variants)) for i in r]
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
            return StepInfo(t, -1, self.order[(t - self.warmup) % len(self.order)], t + 1 == self.warmup)
        it, k = divmod(t - self.warmup, self.batches_per_iter)
        return StepInfo(t, it, self.order[it % len(self.order)], k + 1 == self.batches_per_iter)

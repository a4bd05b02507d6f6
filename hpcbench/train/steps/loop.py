"""The step loop: one synchroniser entry's run, step by step, with hooks.

Per step ``t`` of a run, on every rank:

1. the plan names the step (:class:`hpcbench.train.steps.plan.MeasuredPlan`), and
   the policies' decisions due before it are applied;
2. ``before_epoch`` (when a new epoch starts, and before the first step)
   and ``before_step`` hooks, in list order;
3. the replica trains the step on this worker's slice of the data
   (:meth:`hpcbench.train.workloads.split.SplitTask.take`, sized by the context's
   :class:`~hpcbench.train.steps.context.BatchState`);
4. the step's numbers (the machinery's own time included: the policies'
   calls and agreement of the previous step, the telemetry hook's time;
   with telemetry, this rank's
   :class:`~hpcbench.telemetry.TelemetryRecord` too) go to rank 0 (every
   rank, when a policy asks for them everywhere) and become its
   :class:`~hpcbench.policies.telemetry.Telemetry`;
5. ``after_step`` hooks in reverse order, then ``after_epoch`` hooks (reverse
   order) when the step completed an epoch;
6. the policies' proposals are agreed (:class:`hpcbench.train.adaptation.policyhook.PolicyHook`),
   and the decisions due before the next step are applied when it starts.

After the last step the replica completes what is in flight and the
``after_train`` hooks run (reverse order). The run is a generator that
yields after the warm-up and after each measured iteration, so that the job
can run several synchronisers' iterations in turn (``interleave_sync``).
"""

from __future__ import annotations

import numpy as np

from hpcbench.policies.telemetry import Telemetry
from hpcbench.runtime.heap import trim_heap
from hpcbench.runtime.wait import sleep_allgather, sleep_gather
from hpcbench.train.steps import replica
from hpcbench.train.reporting.tables import STEP_FIELDS

__all__ = ["TrainLoop"]


class _LinkCounter:
    """A transport's payload bytes over its link (``link_bytes_sent`` of a modelled link: with ``link.scope:
    between_hosts`` those to other hosts; every byte sent otherwise) and modelled link time
    (``modelled_busy_s``, NaN where it has none) since this object was made: one step's ``sent_bytes`` and
    ``link_busy_s``, whose ratio is the link's seconds per byte."""

    __slots__ = ("tr", "bytes", "busy")

    def __init__(self, tr) -> None:
        self.tr = tr
        self.bytes = self._sent(tr) if tr is not None else 0
        self.busy = getattr(tr, "modelled_busy_s", np.nan)

    @staticmethod
    def _sent(tr) -> int:
        return getattr(tr, "link_bytes_sent", tr.bytes_sent)

    def since(self) -> tuple[float, float]:
        if self.tr is None:
            return np.nan, np.nan
        return float(self._sent(self.tr) - self.bytes), float(getattr(self.tr, "modelled_busy_s", np.nan) - self.busy)


class TrainLoop:
    """Run one entry's steps with hooks (see the module docstring).

    Parameters
    ----------
    ctx : hpcbench.train.steps.context.TrainContext
        The run's context (its ``worker`` is built by :meth:`run`).
    hooks : sequence of hpcbench.train.steps.hooks.Hook
        In order: before-methods run first to last, after-methods last to first.
    plan : object with ``next(ctx) -> StepInfo | None``
    policies : hpcbench.train.adaptation.policyhook.PolicyHook, optional
        The policies' hook (also in ``hooks``): at the end of each step the
        loop asks it to agree on the step's decisions; before each step it
        applies those due (:func:`hpcbench.train.adaptation.decisions.apply_decision`)
        and tells every hook (``on_decision``).
    telemetry : hpcbench.train.reporting.telemetryhook.TelemetryHook, optional
        (Also in ``hooks``.) After each step its ``measure`` gives this rank's
        telemetry record, gathered with the step's numbers.
    """

    def __init__(self, ctx, hooks, plan, policies=None, telemetry=None) -> None:
        self.ctx, self.hooks, self.plan, self.policies = ctx, list(hooks), plan, policies
        self.telemetry = telemetry
        self.reversed = self.hooks[::-1]
        self.fields = STEP_FIELDS
        if telemetry is not None:
            from hpcbench.telemetry import TelemetryRecord

            self.fields = STEP_FIELDS + TelemetryRecord.names()
        #: every rank gets every rank's numbers (a policy reads them), else rank 0 only
        self.gather_all = bool(policies is not None and policies.needs_all_ranks)

    def run(self):
        """Train every step of the plan; a generator yielding each iteration's index at its last step."""
        ctx = self.ctx
        data = ctx.setup.data if ctx.setup.settings.compute == "real" else None
        elastic = ctx.elastic
        if elastic is not None:
            elastic.start(ctx, self.hooks)      # collective over every rank started
        try:
            if elastic is None or elastic.active:
                ctx.worker = replica.build_worker(ctx)
                for h in self.hooks:
                    h.before_train(ctx)
                info = self.plan.next(ctx)
            else:
                info = elastic.join(ctx)        # sleeps in the pool until a grow (None: the run ended)
            while info is not None:
                info = self._apply(info)
                if info is None:
                    break
                ctx.info = info
                epoch = ctx.epoch
                if epoch > ctx.epochs_started:
                    ctx.epochs_started = epoch
                    for h in self.hooks:
                        h.before_epoch(ctx)
                for h in self.hooks:
                    h.before_step(ctx)
                sizes = ctx.state.sizes
                batch = data.take(ctx.samples, sizes) if data is not None else None
                link = _LinkCounter(ctx.setup.transport)
                rec = ctx.worker.step(info.step, batch, ctx.monitors_due)
                rec.sent_bytes, rec.link_busy_s = link.since()
                tel_vector = self._machinery(ctx, rec)
                local = rec.vector() if tel_vector is None else np.concatenate([rec.vector(), tel_vector])
                comm = ctx.comm
                ranks = sleep_allgather(comm, local) if self.gather_all else sleep_gather(comm, local)
                tel = Telemetry(info.step, epoch, self.fields, local, ranks, rec.monitor_values, sizes)
                ctx.samples += int(sum(sizes))
                for h in self.reversed:
                    h.after_step(ctx, tel)
                if ctx.epoch > epoch:
                    for h in self.reversed:
                        h.after_epoch(ctx)
                if self.policies is not None:
                    self.policies.agree(ctx)
                if info.last:
                    yield info.iteration
                info = self.plan.next(ctx)
            if ctx.worker is not None:
                ctx.worker.flush()
                for h in self.reversed:
                    h.after_train(ctx)
            if elastic is not None:
                elastic.close(ctx)
        finally:
            if ctx.worker is not None:
                ctx.worker.close()
            ctx.worker = None      # free its buffers before the next synchroniser's
            trim_heap()

    def _machinery(self, ctx, rec):
        """Fill ``rec``'s machinery times (run's clock): the policies' calls and agreement of the previous
        step (:attr:`~hpcbench.train.steps.context.TrainContext.last_agreement`), and the telemetry hook's time
        since the last step's numbers, this step's record included; returns that record's vector (None
        without telemetry)."""
        to_model = ctx.setup.dilation.to_model
        if self.policies is not None:
            calls, agree = ctx.last_agreement
            rec.policy_calls_s, rec.policy_agree_s = to_model(calls), to_model(agree)
        if self.telemetry is None:
            return None
        vector = self.telemetry.measure(ctx, rec)
        rec.telemetry_s = to_model(self.telemetry.take_spent())
        return vector

    def _apply(self, info):
        """Apply the agreed decisions due before step ``info`` and tell every hook; the step to run (``info``,
        or, on a rank a shrink leaves out, the step it rejoins at; None: the run ended while it waited).

        A worker-count decision is applied after the others due at the same step, so that a worker that
        joins receives the context they made.
        """
        if self.policies is None:
            return info
        from hpcbench.train.adaptation.decisions import apply_decision

        due = self.policies.due(info.step)
        due.sort(key=lambda d: d[1].workers is not None)
        self.ctx.upcoming = info
        for name, decision, decided in due:
            applied = apply_decision(self.ctx, name, decision, decided, info.step)
            for h in self.hooks:
                h.on_decision(self.ctx, applied)
        self.ctx.upcoming = None
        elastic = self.ctx.elastic
        if elastic is not None and not elastic.active:
            return elastic.join(self.ctx)
        return info

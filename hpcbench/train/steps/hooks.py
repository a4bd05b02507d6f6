"""Hooks of the step loop: the contract (KungFu's policy hooks) and the loop's own hooks.

A hook has KungFu's six methods (``srcs/python/kungfu/tensorflow/policy/
base_policy.py``): ``before_train``, ``before_epoch``, ``before_step``,
``after_step``, ``after_epoch``, ``after_train``. The loop
(:class:`hpcbench.train.steps.loop.TrainLoop`) calls the before-methods in list
order and the after-methods in reverse order, as KungFu's ``PolicyHook``
does (nested like context managers: the first hook sees a step first and
last). Every hook receives the run's :class:`~hpcbench.train.steps.context.TrainContext`;
``after_step`` also the step's :class:`~hpcbench.policies.telemetry.Telemetry`.
``on_decision`` tells every hook about a decision the loop applied (a
policy's, :mod:`hpcbench.policies`).

The loop's own concerns are hooks here: the fault injection point, the
monitors, rank 0's progress bar; the report (:mod:`hpcbench.train.reporting.report`)
and the policies (:mod:`hpcbench.train.adaptation.policyhook`) are hooks too.
"""

from __future__ import annotations

import sys

__all__ = ["Hook", "FaultHook", "LinkStepHook", "MonitorHook", "Progress", "variants"]


class Hook:
    """A no-op for each of the loop's calls; subclasses override what they need.

    A hook that runs on some ranks only (rank 0's report) must not use
    collectives; one that runs on every rank may, as long as every rank calls
    them in the same order.
    """

    def before_train(self, ctx) -> None:
        """Once, before the first step of a run (the replica is built)."""

    def before_epoch(self, ctx) -> None:
        """Before the first step of each epoch (``ctx.epoch``), including epoch 0."""

    def before_step(self, ctx) -> None:
        """Before step ``ctx.info.step``."""

    def after_step(self, ctx, telemetry) -> None:
        """After step ``ctx.info.step``, with its telemetry."""

    def after_epoch(self, ctx) -> None:
        """After the step that completed an epoch (the samples trained reached a multiple of the epoch size)."""

    def after_train(self, ctx) -> None:
        """Once, after the last step (what the last step left in flight is complete)."""

    def on_decision(self, ctx, applied) -> None:
        """A policy's decision was applied before step ``applied.step`` (every rank, same step)."""

    def export_state(self):
        """What a worker that joins the run mid-way (an elastic grow) needs of this hook's state (picklable;
        None: nothing). Called on rank 0, which is always active."""
        return None

    def import_state(self, state) -> None:
        """Continue from rank 0's :meth:`export_state` (on a joining worker)."""


class FaultHook(Hook):
    """``--fault-inject RANK:STEP:MODE``'s point: :func:`hpcbench.runtime.faults.fault_point` before each step,
    numbered over the whole job from 1 (one instance serves every run of the job)."""

    def __init__(self) -> None:
        self.steps_done = 0

    def before_step(self, ctx) -> None:
        from hpcbench.runtime.faults import fault_point

        self.steps_done += 1
        fault_point(self.steps_done)

    def export_state(self):
        return self.steps_done

    def import_state(self, state) -> None:
        self.steps_done = state


class LinkStepHook(Hook):
    """Tells the run's modelled links the step about to run (:meth:`hpcbench.collectives.linkmodel.LinkTransport.at_step`),
    so that the slow links injected by ``link.slow`` take effect from their step; the link model decides the
    factor."""

    def before_step(self, ctx) -> None:
        ctx.setup.transport.at_step(ctx.info.step)


def variants(monitors, interleave: bool) -> list[tuple[str, list]]:
    """``(name, monitors)`` of each variant: all monitors together, or none and each alone in turn (a variant is
    named by its monitors' labels)."""
    if interleave:
        return [("none", []), *((m.label, [m]) for m in monitors)]
    return [("+".join(m.label for m in monitors) or "none", list(monitors))]


class MonitorHook(Hook):
    """KungFu's online monitors: which of them observe each step (``ctx.monitors_due``), by the step's variant.

    With ``interleave_monitors`` the measured iterations cycle through the
    variants ``none``, then each monitor alone (figure 8: the same model
    keeps training; each variant's throughput comes from the iterations it
    ran, so slow drifts of the machine's load fall on every variant alike).

    Parameters
    ----------
    entries : sequence of (str, dict)
        Registered monitor names and their options (``TrainConfig.monitor_entries``).
    interval : int
        Steps between observations.
    interleave : bool
    """

    def __init__(self, entries, interval: int, interleave: bool) -> None:
        self.monitors = []
        if entries:    # the monitors import torch
            from hpcbench.monitors import build_monitor

            self.monitors = [build_monitor(m, interval=interval, **options) for m, options in entries]
        self.variants = variants(self.monitors, interleave)
        self._by_name = dict(self.variants)

    def before_step(self, ctx) -> None:
        t = ctx.info.step
        ctx.monitors_due = [m for m in self._by_name[ctx.info.variant] if m.due(t)]


class Progress(Hook):
    """Rank 0's progress over every step of the job; lines printed through it keep the bar intact.

    :func:`hpcbench.runtime.progress.progress_bar`: a tqdm bar when stderr is
    a terminal, a plain line every few percent elsewhere (a Slurm ``.out``
    file, a pipe), never carriage-return redraws in a log.

    Parameters
    ----------
    total : int or None
        Steps of the whole job (None: unknown).
    enabled : bool
        False: no bar (lines still print).
    """

    def __init__(self, total, enabled: bool) -> None:
        from hpcbench.runtime.progress import progress_bar

        self.bar = progress_bar(total, unit="step", file=sys.stderr, disable=not enabled, leave=False,
                                dynamic_ncols=True)

    def write(self, text: str) -> None:
        """Print ``text`` on stdout above the bar."""
        self.bar.write(text, file=sys.stdout)

    def after_step(self, ctx, telemetry) -> None:
        self.bar.update(1)

    def close(self) -> None:
        """Remove the bar."""
        self.bar.close()

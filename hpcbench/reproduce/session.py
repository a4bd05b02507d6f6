"""One reproduction: launch what is not up to date, draw every figure, record everything.

The same loop drives both launchers (:mod:`~hpcbench.reproduce.local` runs
each command to its end as it starts it; :mod:`~hpcbench.reproduce.slurm`
submits and waits): a run starts once the runs it reads (``from:``
overrides) have ended, is skipped when the ledger shows its results file
up to date (same recipe, same code: :mod:`~hpcbench.reproduce.identity`),
and a figure is drawn once all its runs have completed (a failed run leaves
it undrawn, as ``afterok`` would). A drawing script that exits non-zero is
a failed figure. Every start, skip and end is a ledger line and one printed
line.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any, Callable

from hpcbench.reproduce.data import FigureData
from hpcbench.reproduce.expression import ExpressionError, evaluate
from hpcbench.reproduce.ledger import Ledger, config_digest
from hpcbench.reproduce.local import Handle
from hpcbench.reproduce.manifest import FromResults
from hpcbench.reproduce.plan import Plan, Run

__all__ = ["RunOutcome", "DrawOutcome", "Session"]


@dataclass
class RunOutcome:
    """How a run ended: ``state`` ``done``, ``skipped`` (up to date), ``failed`` or ``not run``.

    ``other_code``: for a file kept by ``--reuse`` though other code made it,
    the code identity its ledger line recorded (``{}`` when none); else None.
    """

    run: Run
    state: str
    rc: int | None = None
    wall_s: float | None = None
    note: str = ""
    command: list[str] = field(default_factory=list)
    other_code: dict | None = None

    @property
    def ok(self) -> bool:
        """True when its results file is complete (run now or before)."""
        return self.state in ("done", "skipped")


@dataclass
class DrawOutcome:
    """How a figure's drawing ended: ``drawn``, ``failed`` or ``not drawn``."""

    figure: str
    state: str
    rc: int | None = None
    wall_s: float | None = None
    note: str = ""
    command: list[str] = field(default_factory=list)


def _resolve(run: Run, plan: Plan) -> dict[str, Any]:
    """Values of the run's ``from:`` overrides, read from the runs of its figure."""
    data = FigureData(plan.runs_of(run.figure))
    out = {}
    for key, value in run.overrides.items():
        if isinstance(value, FromResults):
            number = evaluate(value.expression, data).value
            out[key] = int(number) if float(number).is_integer() else number   # counts stay integers
    return out


class Session:
    """Launch, skip, draw and record the runs of a plan.

    Parameters
    ----------
    plan : Plan
    ledger : Ledger
    launcher : LocalLauncher or SlurmLauncher
    force : bool
        Run every job even when its results file is up to date.
    say : callable
        Where progress lines go (``print``).
    code : dict, optional
        This session's :func:`~hpcbench.reproduce.identity.code_identity`
        (default: computed here), recorded with every run.
    reuse : bool
        Keep a results file made by the same recipe but other code.
    """

    def __init__(self, plan: Plan, ledger: Ledger, launcher, force: bool = False,
                 say: Callable[[str], None] = print, code: dict | None = None, reuse: bool = False) -> None:
        from hpcbench.reproduce.identity import code_identity

        self.plan, self.ledger, self.launcher, self.force, self.say = plan, ledger, launcher, force, say
        self.code = code_identity() if code is None else code
        self.reuse = reuse
        self.runs: dict[str, RunOutcome] = {}
        self.draws: dict[str, DrawOutcome] = {}
        self._active: dict[str, tuple[Handle, Run, str]] = {}
        self._drawing: dict[str, Handle] = {}
        self._count = 0

    def _label(self, run: Run) -> str:
        self._count += 1
        width = len(str(len(self.plan.runs)))
        return f"[{self._count:>{width}}/{len(self.plan.runs)}] {run.key}"

    def _start(self, run: Run) -> None:
        deps = [r for r in self.plan.runs_of(run.figure) if r.job.id in run.reads]
        bad = [r for r in deps if not self.runs[r.key].ok]
        label = self._label(run)
        if bad:
            self._not_run(run, label, f"it reads run {bad[0].name}, which {self.runs[bad[0].key].state}")
            return
        try:
            resolved = _resolve(run, self.plan)
        except ExpressionError as exc:
            self._not_run(run, label, f"cannot read its from: value: {exc}")
            return
        recipe = run.recipe(resolved)
        fresh, why, other = self.ledger.up_to_date(run.output, recipe, self.code, self.reuse)
        if fresh and not self.force:
            self.runs[run.key] = RunOutcome(run, "skipped", 0, 0.0, why, other_code=other)
            self.ledger.record(kind="skip", figure=run.figure, name=run.name, output=str(run.output), why=why,
                               **({"other_code": other} if other is not None else {}))
            self.say(f"{label}: skipped ({why})")
            return
        argv = run.argv(resolved)
        if resolved:
            self.say(f"{label}: from results: " + ", ".join(f"{k}={v:.6g}" for k, v in resolved.items()))
        self.say(f"{label}: {run.job.runner} on {run.ranks} rank(s), expected {run.expected_s:.0f} s "
                 f"({why}) ...")
        from hpcbench.reproduce.local import Interrupted

        try:
            handle = self.launcher.start_run(run, argv)
        except Interrupted as exc:          # recorded by execute() as this run's outcome
            self._active[run.key] = (exc.handle, run, recipe)
            raise
        self._active[run.key] = (handle, run, recipe)
        if handle.done:
            self._ended(handle)

    def _not_run(self, run: Run, label: str, why: str) -> None:
        self.runs[run.key] = RunOutcome(run, "not run", None, None, why)
        self.ledger.record(kind="not run", figure=run.figure, name=run.name, output=str(run.output), why=why)
        self.say(f"{label}: not run: {why}")

    def _ended(self, handle: Handle) -> None:
        if handle.key.startswith("draw/"):
            self._drawn(handle)
            return
        _, run, recipe = self._active.pop(handle.key)
        state = "done" if handle.rc == 0 else "failed"
        note = handle.note or ("" if handle.rc == 0 else f"exit status {handle.rc}; log {handle.log}")
        self.runs[run.key] = RunOutcome(run, state, handle.rc, handle.wall_s, note, handle.command)
        self.ledger.record(kind="run", figure=run.figure, name=run.name, command=handle.command, rc=handle.rc,
                           wall_s=handle.wall_s, output=str(run.output), log=handle.log, recipe=recipe,
                           config_sha256=config_digest(run.output) if handle.rc == 0 else "",
                           launcher=self.launcher.name, job_id=handle.job_id, expected_s=run.expected_s,
                           note=note, code=self.code, load_average=[round(x, 2) for x in os.getloadavg()])
        wall = f"{handle.wall_s:.1f} s" if handle.wall_s is not None else "unknown time"
        self.say(f"    {run.key}: {state} in {wall} (exit {handle.rc}){': ' + note if note else ''}")
        if state == "failed":
            self._tail(handle.log)

    def _tail(self, log: str, lines: int = 12) -> None:
        try:
            with open(log, encoding="utf-8", errors="replace") as f:
                tail = f.read().splitlines()[-lines:]
        except OSError:
            return
        for line in tail:
            self.say(f"      | {line}")

    def _draw(self, figure: str) -> None:
        runs = self.plan.runs_of(figure)
        bad = [r for r in runs if r.key in self.runs and not self.runs[r.key].ok]
        drawing = self.plan.drawings[figure]
        if bad:
            why = f"run {bad[0].name} {self.runs[bad[0].key].state}"
            self.draws[figure] = DrawOutcome(figure, "not drawn", note=why)
            self.ledger.record(kind="draw", figure=figure, rc=None, note=f"not drawn: {why}")
            self.say(f"figure {figure}: not drawn ({why})")
            return
        after = [self._active[r.key][0] for r in runs if r.key in self._active]
        from hpcbench.reproduce.local import Interrupted

        try:
            handle = self.launcher.start_draw(drawing, after)
        except Interrupted as exc:
            self._drawing[figure] = exc.handle
            raise
        self._drawing[figure] = handle
        if handle.done:
            self._drawn(handle)

    def _drawn(self, handle: Handle) -> None:
        figure = handle.key.removeprefix("draw/")
        self._drawing.pop(figure, None)
        png = self.plan.drawings[figure].png
        bad = [r for r in self.plan.runs_of(figure) if r.key in self.runs and not self.runs[r.key].ok]
        if bad and handle.rc != 0:
            state, note = "not drawn", f"run {bad[0].name} {self.runs[bad[0].key].state}"
        elif handle.rc == 0:
            state, note = "drawn", ""
        else:
            state, note = "failed", handle.note or f"exit status {handle.rc}; log {handle.log}"
        self.draws[figure] = DrawOutcome(figure, state, handle.rc, handle.wall_s, note, handle.command)
        self.ledger.record(kind="draw", figure=figure, command=handle.command, rc=handle.rc, wall_s=handle.wall_s,
                           log=handle.log, note=note, job_id=handle.job_id)
        self.say(f"figure {figure}: {state}{' (' + note + ')' if note else ''} -> {png}")
        if state == "failed":
            self._tail(handle.log)

    def _draw_ready(self, figures: list[str]) -> bool:
        """Draw (or submit the drawing of) every figure whose runs have all ended (or, async, started)."""
        drew = False
        for figure in list(figures):
            runs = self.plan.runs_of(figure)
            if any(r.key not in self.runs and r.key not in self._active for r in runs):
                continue
            if any(r.key in self._active for r in runs) and not self.launcher.asynchronous:
                continue
            figures.remove(figure)
            self._draw(figure)
            drew = True
        return drew

    def execute(self) -> None:
        """Run the plan to its end (every run ended, every figure drawn or not).

        Figures are drawn as soon as their runs have ended (locally) or been
        submitted (Slurm, dependent jobs), so a session cut short keeps the
        figures it finished. On Ctrl-C the command that was running has been
        ended by its launcher; its ledger line is written (exit status 130)
        and the KeyboardInterrupt goes on to the caller, which reports what
        was done.

        Raises
        ------
        KeyboardInterrupt
            Ctrl-C; the interrupted command's outcome is recorded first.
        """
        from hpcbench.reproduce.local import Interrupted

        try:
            self._execute()
        except Interrupted as exc:
            self._ended(exc.handle)
            raise KeyboardInterrupt from None

    def _execute(self) -> None:
        pending = list(self.plan.runs)
        figures = list(self.plan.figures)
        while pending or self._active or figures or self._drawing:
            progressed = False
            for run in list(pending):
                deps = [r for r in self.plan.runs_of(run.figure) if r.job.id in run.reads]
                if any(d.key not in self.runs for d in deps):
                    continue
                pending.remove(run)
                self._start(run)
                self._draw_ready(figures)
                progressed = True
            progressed = self._draw_ready(figures) or progressed
            waiting = [h for h, _, _ in self._active.values()] + list(self._drawing.values())
            if waiting and not progressed:
                for handle in self.launcher.wait(waiting):
                    self._ended(handle)
            elif not waiting and not progressed and (pending or figures):
                raise RuntimeError("reproduce: nothing to start and nothing running; runs "
                                   f"{[r.key for r in pending]} wait on each other")  # pragma: no cover

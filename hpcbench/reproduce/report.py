"""The reproduction's HTML report: one file that opens in a browser without a server.

Rendered with Jinja2 from ``templates/report.html.j2``: the code identity
(commit, uncommitted changes, versions), the claims table (verdict, doc
agreement, whose files),
every figure embedded as a PNG data URI (its PDF linked beside it), each
figure's runs with their commands, exit statuses and wall times, the
machine (CPU, cores, memory, MPI library, package versions, load), each
input file's provenance (root attributes and config) and this session's
ledger.
"""

from __future__ import annotations

import base64
import os
import shlex
import time
from pathlib import Path

from hpcbench.reproduce.claims import ClaimResult
from hpcbench.reproduce.identity import short
from hpcbench.reproduce.manifest import Manifest
from hpcbench.reproduce.plan import Plan
from hpcbench.reproduce.session import Session
from hpcbench.runtime.errors import InputError

__all__ = ["write_report"]


def _data_uri(png: Path) -> str:
    return "data:image/png;base64," + base64.b64encode(png.read_bytes()).decode("ascii")


def _relative(path: Path, start: Path) -> str:
    return os.path.relpath(path, start)


def _run_rows(plan: Plan, session: Session, figure: str) -> list[dict]:
    rows = []
    for run in plan.runs_of(figure):
        o = session.runs.get(run.key)
        state, note = (o.state, o.note) if o else ("not reached", "the session ended before it")
        wall, rc, command = (o.wall_s, o.rc, o.command) if o else (None, None, [])
        if o is not None and o.state == "skipped":      # made by an earlier session: show that run
            prev = session.ledger.last_run(run.output) or {}
            wall, rc, command = prev.get("wall_s"), prev.get("rc"), prev.get("command", [])
            note = f"{o.note}; ran {prev.get('time', '?')}"
            if o.other_code is not None:
                note += f" by {short(o.other_code)}"
        rows.append({"name": run.name, "runner": run.job.runner, "ranks": run.ranks, "state": state, "note": note,
                     "wall": f"{wall:.1f}" if wall is not None else "", "expected": f"{run.expected_s:.0f}",
                     "rc": "" if rc is None else rc,
                     "command": shlex.join(command) if command else "(no command ran)"})
    return rows


def _inputs(plan: Plan) -> list[dict]:
    from hpcbench.results.reader import open_file, read_attrs
    from hpcbench.results.status import run_status

    out = []
    for run in plan.runs:
        if not run.output.is_file():
            out.append({"path": str(run.output), "status": "missing", "attrs": [], "config": ""})
            continue
        try:
            with open_file(run.output) as h5:
                attrs = read_attrs(h5)
        except (OSError, InputError) as exc:
            out.append({"path": str(run.output), "status": f"unreadable ({exc})", "attrs": [], "config": ""})
            continue
        shown = [(k, v) for k, v in sorted(attrs.items()) if k not in ("config", "config_json", "config_yaml")]
        out.append({"path": str(run.output), "status": str(run_status(run.output, attrs)), "attrs": shown,
                    "config": str(attrs.get("config_yaml", ""))})
    return out


def write_report(path: Path, manifest: Manifest, plan: Plan, session: Session, claims: list[ClaimResult],
                 machine: dict, command: str, launcher: str, wall_s: float, load_start: list[float]) -> Path:
    """Render the report to ``path`` (its folder is created); returns ``path``.

    Parameters
    ----------
    path : pathlib.Path
        The HTML file.
    manifest, plan, session
        What was planned and how each run and drawing ended.
    claims : list of ClaimResult
        Every claim of the chosen figures.
    machine : dict
        :func:`hpcbench.reproduce.machine.describe_machine`.
    command : str
        The command line of the reproduction.
    launcher : str
        ``local`` or ``slurm``.
    wall_s : float
        Wall seconds of the whole reproduction.
    load_start : list of float
        Load average when it started.
    """
    from jinja2 import Environment, PackageLoader, select_autoescape

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    figures = []
    for name in plan.figures:
        fig = manifest.figures[name]
        drawing = plan.drawings[name]
        outcome = session.draws.get(name)
        drawn = outcome is not None and outcome.state == "drawn" and drawing.png.is_file()
        figures.append({
            "name": name, "title": fig.title, "paper": fig.paper, "script": fig.analysis.script,
            "image": _data_uri(drawing.png) if drawn else "",
            "png_link": _relative(drawing.png, path.parent) if drawn else "",
            "pdf": _relative(drawing.pdf, path.parent) if drawn and drawing.pdf.is_file() else "",
            "draw_note": outcome.note if outcome is not None else "the session ended before drawing it",
            "runs": _run_rows(plan, session, name)})
    counts = {"PASS": sum(c.verdict == "PASS" for c in claims), "FAIL": sum(c.verdict == "FAIL" for c in claims),
              "na": sum(c.verdict == "n/a" for c in claims)}
    states = [o.state for o in session.runs.values()]
    env = Environment(loader=PackageLoader("hpcbench.reproduce", "templates"),
                      autoescape=select_autoescape(["html", "j2"]))
    html = env.get_template("report.html.j2").render(
        tier=plan.tier, generated=time.strftime("%Y-%m-%d %H:%M:%S %Z"), command=command, out=str(plan.out),
        launcher=launcher, wall_s=wall_s, expected_s=plan.expected_s, counts=counts, claims=claims,
        runs_done=states.count("done"), runs_skipped=states.count("skipped"),
        runs_failed=states.count("failed") + states.count("not run"),
        figures_drawn=sum(1 for f in figures if f["image"]), figures=figures, machine=machine,
        load_start=load_start, inputs=_inputs(plan), ledger=session.ledger.session, code=session.code)
    path.write_text(html, encoding="utf-8")
    return path

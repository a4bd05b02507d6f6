"""From the manifest to the runs of one tier: names, ranks, command lines, output files, recipes.

A :class:`Run` is one ``mpiexec``/``sbatch`` job: a job of the manifest at
one point and one seed. Its *recipe* (runner, ranks, the config file's
bytes, arguments, overrides with every ``from:`` value resolved, environment)
is hashed: a results file made by the same recipe that completed is not made
again (:mod:`hpcbench.reproduce.ledger`).
"""

from __future__ import annotations

import hashlib
import json
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hpcbench.reproduce.manifest import ROOT, FromResults, Job, Manifest, ManifestError, Point, runners
from hpcbench.runtime.bounded import read_input

__all__ = ["Run", "Drawing", "Plan", "make_plan", "render_value"]


def render_value(value: Any, style: str) -> str | None:
    """An override's value on the command line (None: leave the flag out).

    ``config`` runners parse values as YAML (``'4:1'`` stays a string, ``[even]`` a list);
    ``flags`` runners take text, lists comma-joined, and booleans as a bare flag.
    """
    import yaml

    if style == "flags":
        if isinstance(value, bool):
            return "" if value else None
        if isinstance(value, (list, tuple)):
            return ",".join(str(v) for v in value)
        return str(value)
    text = yaml.safe_dump(value, default_flow_style=True, width=1 << 30)
    return text.removesuffix("\n").removesuffix("\n...").strip()


@dataclass
class Run:
    """One job of the manifest at one point and seed, in one tier.

    Attributes
    ----------
    figure : str
    job : Job
    name : str
        Unique in the figure: ``JOB[-POINT][-sSEED]``.
    ranks : int
    overrides : dict
        Merged in order: the job's, the tier's, the point's, the seed; values
        may be :class:`FromResults` until resolved.
    expected_s, timeout_s : float
        Expected and largest wall seconds.
    output, log : pathlib.Path
        The results file and the job's output.
    nodes : int or None
        Hosts the ranks are spread over (``sbatch -N``; the local launcher:
        emulated hosts); None: the launcher places them (one host locally).
    """

    figure: str
    job: Job
    name: str
    ranks: int
    overrides: dict[str, Any]
    expected_s: float
    timeout_s: float
    output: Path
    log: Path
    nodes: int | None = None

    @property
    def key(self) -> str:
        """``FIGURE/NAME``: unique in a plan."""
        return f"{self.figure}/{self.name}"

    @property
    def ranks_per_node(self) -> tuple[int, ...]:
        """Ranks of each of its ``nodes`` (block placement, the first nodes one more where they do not divide);
        ``(ranks,)`` without ``nodes``."""
        n = self.nodes or 1
        return tuple(self.ranks // n + (1 if i < self.ranks % n else 0) for i in range(n))

    @property
    def reads(self) -> set[str]:
        """Job ids whose results its ``from:`` overrides read."""
        return {ref.job for v in self.overrides.values() if isinstance(v, FromResults)
                for ref in v.expression.refs}

    def argv(self, resolved: dict[str, Any]) -> list[str]:
        """Arguments after the interpreter: ``-m hpcbench.cli RUNNER [CONFIG] ... --output FILE --overwrite``.

        ``resolved`` gives the value of every :class:`FromResults` override.
        """
        style = runners()[self.job.runner]
        out = ["-m", "hpcbench.cli", self.job.runner]
        if self.job.config:
            out.append(self.job.config)
        out += list(self.job.args)
        for key, value in self.overrides.items():
            if isinstance(value, FromResults):
                value = resolved[key]
            text = render_value(value, style)
            if text is None:
                continue
            out += [f"--{key}"] + ([text] if text != "" or style == "config" else [])
        return out + ["--output", str(self.output), "--overwrite"]

    def recipe(self, resolved: dict[str, Any]) -> str:
        """SHA-256 of what makes the run's results: equal recipes make the same experiment."""
        config = read_input(ROOT / self.job.config, f"job {self.job.id!r}: config", "config",
                            "YAML file", gunzip=False) if self.job.config else b""
        plain = {k: (resolved[k] if isinstance(v, FromResults) else v) for k, v in self.overrides.items()}
        recipe = {"runner": self.job.runner, "ranks": self.ranks, "config": self.job.config,
                  "config_sha256": hashlib.sha256(config).hexdigest(), "args": self.job.args,
                  "overrides": plain, "env": self.job.env}
        if self.nodes is not None and self.nodes > 1:   # one host: the recipe of runs made before nodes existed
            recipe["nodes"] = self.nodes
        text = json.dumps(recipe, sort_keys=True, default=str)
        return hashlib.sha256(text.encode()).hexdigest()


@dataclass
class Drawing:
    """A figure's drawing: the script, its inputs (runs in order) and the files it writes."""

    figure: str
    script: str
    args: list[str]
    inputs: list[Run]
    png: Path
    pdf: Path

    def argv(self) -> list[str]:
        """Arguments after the interpreter: ``analysis/X.py FILES... ARGS -o PNG -o PDF``."""
        return [self.script, *(str(r.output) for r in self.inputs), *self.args, "-o", str(self.png),
                "-o", str(self.pdf)]


@dataclass
class Plan:
    """The runs and drawings of the chosen figures in one tier, in launch order."""

    tier: str
    out: Path
    figures: list[str]
    runs: list[Run] = field(default_factory=list)
    drawings: dict[str, Drawing] = field(default_factory=dict)
    python: str = sys.executable
    #: chosen figures that cannot run here -> why (``requires`` unmet); they have no runs and no drawing
    unavailable: dict[str, str] = field(default_factory=dict)

    def runs_of(self, figure: str, job: str | None = None) -> list[Run]:
        """The runs of a figure (of one of its jobs), in plan order."""
        return [r for r in self.runs if r.figure == figure and (job is None or r.job.id == job)]

    @property
    def expected_s(self) -> float:
        """Expected wall seconds of every run."""
        return sum(r.expected_s for r in self.runs)


def _point_name(job: Job, point: Point, ranks: int) -> str:
    if point.name:
        return point.name
    return f"np{ranks}"


def _expand(figure: str, job: Job, tier: str, out: Path) -> list[Run]:
    points = [p for p in (job.points or [Point()]) if tier in (p.tiers or job.tiers)]
    if tier not in job.tiers:
        return []
    runs = []
    for point in points:
        ranks = point.ranks or job.ranks
        suffix = f"-{_point_name(job, point, ranks)}" if job.points else ""
        for seed in job.seeds_in(tier) or [None]:
            name = f"{job.id}{suffix}" + (f"-s{seed}" if seed is not None else "")
            overrides = dict(job.overrides)
            overrides.update(job.tier_overrides.get(tier, {}))
            overrides.update(point.overrides)
            if seed is not None:
                overrides["seed"] = seed
            expected = job.expected(tier, point)
            timeout = job.timeout_s or max(600.0, 10.0 * expected)
            runs.append(Run(figure, job, name, ranks, overrides, expected, timeout,
                            out / "runs" / figure / f"{name}.h5", out / "logs" / figure / f"{name}.log",
                            point.nodes or job.nodes))
    return runs


def _ordered(runs: list[Run], figure: str) -> list[Run]:
    """Runs of one figure with every run after the jobs it reads (manifest order otherwise)."""
    left, ordered = list(runs), []
    done = {j for r in runs for j in r.reads} - {r.job.id for r in runs}   # read jobs without runs here
    while left:
        ready = [r for r in left if r.reads <= done]
        if not ready:
            raise ManifestError(f"figures.{figure}: jobs read each other's results in a cycle: "
                                f"{', '.join(sorted({r.job.id for r in left}))}")
        nxt = ready[0]
        ordered.append(nxt)
        left.remove(nxt)
        if not any(r.job.id == nxt.job.id for r in left):
            done.add(nxt.job.id)
    return ordered


def _tiers_of(fig) -> str:
    return ", ".join(t for t in ("quick", "full") if any(t in job.tiers for job in fig.jobs))


def make_plan(manifest: Manifest, tier: str, out: Path, figures: list[str] | None = None,
              nodes: int | None = None) -> Plan:
    """The runs and drawings of ``figures`` (default: all) in ``tier``; a figure whose ``requires`` is unmet,
    or with no run in ``tier`` (every job ``tiers: [full]``), goes to ``Plan.unavailable`` with the reason
    instead.

    ``nodes``: a run without ``nodes`` in the manifest is spread over
    ``min(nodes, ranks)`` hosts (``--nodes``); None leaves it to the launcher.

    Raises
    ------
    ManifestError
        An unknown figure name, two runs of a figure with the same name, or
        jobs reading each other in a cycle.
    """
    names = list(figures or manifest.figures)
    unknown = [f for f in names if f not in manifest.figures]
    if unknown:
        raise ManifestError(f"unknown figure {unknown[0]!r}; the manifest has {', '.join(manifest.figures)}")
    plan = Plan(tier, Path(out), [])
    for fig_name in names:
        fig = manifest.figures[fig_name]
        why = fig.requires.missing()
        if why is not None:
            plan.unavailable[fig_name] = why
            continue
        runs = [r for job in fig.jobs for r in _expand(fig_name, job, tier, plan.out)]
        if not runs:
            plan.unavailable[fig_name] = f"no run in the {tier} tier (its jobs name tiers: {_tiers_of(fig)})"
            continue
        plan.figures.append(fig_name)
        seen: set[str] = set()
        for r in runs:
            if r.name in seen:
                raise ManifestError(f"figures.{fig_name}.jobs[{r.job.id}]: two runs named {r.name!r}: give the "
                                    f"points distinct names")
            seen.add(r.name)
        runs = _ordered(runs, fig_name)
        if nodes is not None:
            for r in runs:
                r.nodes = r.nodes or min(int(nodes), r.ranks)
        plan.runs += runs
        inputs = fig.analysis.inputs or [j.id for j in fig.jobs]
        drawn = [r for job_id in inputs for r in runs if r.job.id == job_id]
        figdir = plan.out / "figures"
        plan.drawings[fig_name] = Drawing(fig_name, fig.analysis.script, list(fig.analysis.args), drawn,
                                          figdir / f"{fig_name}.png", figdir / f"{fig_name}.pdf")
    return plan

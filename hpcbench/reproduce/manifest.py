"""The reproduction manifest (``jobs/reproduce.yaml``): figures, the jobs behind them, their claims.

Validated with pydantic when loaded; any fault is a :class:`ManifestError`
(an ``InputError``: ``hpcbench reproduce`` exits 2) naming the entry, e.g.
``figures.fl-selection.jobs[oort].runner``. The format (docs/reproduce.md)::

    version: 1
    x-NAME: ...                        # ignored: a place for YAML anchors (&name) used below
    figures:
      FIGURE:                          # a name: letters, digits, '-' and '_'
        title: ...                     # one line
        paper: ...                     # the paper figure or claim it mirrors
        jobs:
          - id: JOB                    # an identifier, unique in the figure
            runner: fl                 # fl | collectives | compress | costmodel | pipeline | train
            ranks: 4                   # MPI ranks (mpiexec -n / sbatch --ntasks)
            nodes: 2                   # optional: hosts the ranks are spread over (sbatch -N; local: emulated hosts)
            config: jobs/configs/digits.yaml    # runners that take a YAML job file
            overrides: {rounds: 60}    # --KEY VALUE; {from: QUANTITY}: a value read from another job
            args: [--overlap]          # flags without a value
            seeds: [1, 2, 3]           # one run per seed (--seed); or {quick: [1], full: [1, 2, 3]}
            points:                    # one run per point, each with its own ranks/overrides/tiers
              - {ranks: 8, tiers: [quick, full]}
            tiers: [quick, full]       # where the job runs (default both)
            tier_overrides: {quick: {rounds: 30}}
            expected_s: {quick: 20, full: 60}   # wall seconds per run on a 2-core machine
        analysis: {script: analysis/plot_tta.py, args: [], inputs: [JOB, ...]}
        requires: {dataset: fashion_mnist}   # optional: a data set installed apart (hpcbench.datasets.installed);
                                             # missing, the figure is n/a with the reason and runs nothing
        claims:
          - name: CLAIM                # unique in the figure
            mirrors: ...               # the paper/figure/document claim
            quantity: mean(a.attrs.x) / mean(b.attrs.x)   # hpcbench.reproduce.expression
            op: ">="                   # >=, <=, >, <, between
            threshold: 1.3             # [low, high] for between
            full_only: false           # true: needs the full tier's sizes
            missing_ok: null           # reason text: an empty selection is n/a (e.g. Horovod not built)
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Literal, Union

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from hpcbench.reproduce.expression import Expression, ExpressionError, parse
from hpcbench.runtime.errors import InputError

__all__ = ["ManifestError", "Tier", "TIERS", "runners", "FromResults", "Point", "Job", "Analysis", "Claim",
           "Requires", "Figure", "Manifest", "load_manifest", "ROOT"]

#: The repository root: config files and analysis scripts are named relative to it.
ROOT = Path(__file__).resolve().parent.parent.parent

Tier = Literal["quick", "full"]
TIERS: tuple[str, ...] = ("quick", "full")



def runners() -> dict[str, str]:
    """``hpcbench`` subcommands that run one MPI job writing one results file (``--output``), and how they take
    settings: ``config`` (a YAML job file and ``--dotted.key VALUE`` parsed as YAML) or ``flags`` (plain
    argparse flags); each runner declares it (:class:`hpcbench.results.kinds.RunnerKind` ``settings``)."""
    from hpcbench.cli import load_declarations

    return {name: d.settings for name, d in load_declarations().items() if d.settings is not None}

_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_-]*$")
_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


class ManifestError(InputError):
    """A bad manifest; the message names the entry (``figures.FIGURE.jobs[JOB].KEY``) and the value."""


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, arbitrary_types_allowed=True, allow_inf_nan=False)


class FromResults(_Model):
    """An override whose value is a quantity of another job's results (read when the run starts)."""

    expression: Expression

    def __str__(self) -> str:
        return f"{{from: {self.expression.text}}}"


def _override_values(values: dict[str, Any]) -> dict[str, Any]:
    out = {}
    for key, value in values.items():
        if not isinstance(key, str) or not key or key.startswith("-"):
            raise ValueError(f"override key {key!r}: write the key without dashes (rounds, link.bandwidth)")
        if isinstance(value, dict) and set(value) == {"from"}:
            try:
                value = FromResults(expression=parse(value["from"]))
            except ExpressionError as exc:
                raise ValueError(f"override {key!r}: from: {exc}") from None
        out[key] = value
    return out


def _expected(value, tiers) -> dict[str, float]:
    """Seconds per tier from one number (every tier) or a mapping."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return {t: float(value) for t in tiers}
    return {str(k): float(v) for k, v in value.items()}


class Point(_Model):
    """One run of a job (or one per seed): ranks, overrides and tiers on top of the job's."""

    name: str | None = Field(None, description="suffix of the run's name (default: np<ranks>)")
    ranks: int | None = Field(None, ge=1, le=4096)
    nodes: int | None = Field(None, ge=1, le=4096, description="hosts its ranks are spread over (default: the job's)")
    overrides: dict[str, Any] = Field(default_factory=dict)
    tiers: list[Tier] | None = None
    expected_s: Union[float, dict[Tier, float], None] = None

    @field_validator("overrides")
    @classmethod
    def _overrides(cls, v):
        return _override_values(v)

    @field_validator("name")
    @classmethod
    def _name(cls, v):
        if v is not None and not _NAME.match(v):
            raise ValueError(f"point name {v!r}: letters, digits, '-' and '_' only")
        return v


class Job(_Model):
    """The runs that produce a figure's data: one runner, its settings, and how the tiers size it."""

    id: str
    runner: str
    ranks: int = Field(1, ge=1, le=4096)
    nodes: int | None = Field(None, ge=1, le=4096, description="hosts the ranks are spread over (None: the "
                                                               "launcher's choice, --nodes)")
    config: str | None = None
    overrides: dict[str, Any] = Field(default_factory=dict)
    args: list[str] = Field(default_factory=list)
    seeds: Union[list[int], dict[Tier, list[int]], None] = None
    points: list[Point] = Field(default_factory=list)
    tiers: list[Tier] = Field(default_factory=lambda: list(TIERS))
    tier_overrides: dict[Tier, dict[str, Any]] = Field(default_factory=dict)
    expected_s: Union[float, dict[Tier, float], None] = None
    timeout_s: float | None = Field(None, gt=0)
    env: dict[str, str] = Field(default_factory=dict)

    @field_validator("overrides")
    @classmethod
    def _overrides(cls, v):
        return _override_values(v)

    @field_validator("tier_overrides")
    @classmethod
    def _tier_overrides(cls, v):
        return {tier: _override_values(o) for tier, o in v.items()}

    @field_validator("id")
    @classmethod
    def _id(cls, v):
        if not _IDENT.match(v):
            raise ValueError(f"job id {v!r} must be an identifier (letters, digits, '_'): claims name it")
        return v

    @field_validator("seeds")
    @classmethod
    def _seeds(cls, v):
        for seeds in (v.values() if isinstance(v, dict) else [v] if v is not None else []):
            if not seeds or len(set(seeds)) != len(seeds):
                raise ValueError(f"seeds {seeds}: give distinct seeds, at least one")
        return v

    def seeds_in(self, tier: str) -> list[int] | None:
        """The seeds of ``tier`` (None: the job has no seeds; a tier a mapping leaves out: none)."""
        if isinstance(self.seeds, dict):
            return self.seeds.get(tier)
        return self.seeds

    @field_validator("runner")
    @classmethod
    def _runner(cls, v):
        known = runners()
        if v not in known:
            raise ValueError(f"unknown runner {v!r}; choose from {', '.join(known)}")
        return v

    @field_validator("config")
    @classmethod
    def _config(cls, v):
        if v is not None and not (ROOT / v).is_file():
            raise ValueError(f"config file {v!r} does not exist (paths are relative to the repository root)")
        return v

    @model_validator(mode="after")
    def _consistent(self):
        if isinstance(self.seeds, dict) and set(self.tiers) - set(self.seeds):
            raise ValueError(f"seeds: no seeds for tier {sorted(set(self.tiers) - set(self.seeds))[0]!r}")
        if self.config is not None and runners()[self.runner] != "config":
            raise ValueError(f"runner {self.runner!r} takes flags, not a config file (config: {self.config!r})")
        names = [p.name for p in self.points if p.name]
        if len(set(names)) != len(names):
            raise ValueError(f"point names repeat: {names}")
        for point in self.points or [Point()]:
            nodes, ranks = point.nodes or self.nodes, point.ranks or self.ranks
            if nodes is not None and nodes > ranks:
                where = f"point {point.name or point.ranks}: " if self.points else ""
                raise ValueError(f"{where}nodes: {nodes} nodes for {ranks} ranks (every node needs a rank)")
        for tier in self.tiers:
            points = [p for p in self.points or [Point()] if tier in (p.tiers or self.tiers)]
            for point in points:
                try:
                    self.expected(tier, point)
                except KeyError:
                    where = f"point {point.name or point.ranks or ''} of " if self.points else ""
                    raise ValueError(f"expected_s: no time given for {where}tier {tier!r} (seconds per run, "
                                     f"{{quick: S, full: S}} or one number, on the job or its points)") from None
        return self

    def expected(self, tier: str, point: "Point | None" = None) -> float:
        """Expected wall seconds of one run in ``tier`` (the point's own figure first)."""
        if point is not None and point.expected_s is not None:
            own = _expected(point.expected_s, TIERS)
            if tier in own:
                return own[tier]
        if self.expected_s is None:
            raise KeyError(tier)
        return _expected(self.expected_s, TIERS)[tier]


class Analysis(_Model):
    """The ``analysis/`` script that draws the figure from the jobs' results files."""

    script: str
    args: list[str] = Field(default_factory=list)
    inputs: list[str] | None = Field(None, description="job ids whose files it reads, in order (default: all)")

    @field_validator("script")
    @classmethod
    def _script(cls, v):
        if not v.startswith("analysis/") or not v.endswith(".py") or not (ROOT / v).is_file():
            raise ValueError(f"script {v!r} must be an existing analysis/NAME.py")
        return v


class Claim(_Model):
    """A statement a figure supports, checked against its data with a threshold."""

    name: str
    mirrors: str
    quantity: Expression
    op: Literal[">=", "<=", ">", "<", "between"]
    threshold: Union[float, tuple[float, float]]
    unit: str = ""
    full_only: bool = False
    missing_ok: str | None = None
    min_cores: int | None = Field(None, gt=0)
    note: str = ""
    states: Union[float, tuple[float, float], None] = None
    tolerance: float = Field(0.0, ge=0.0)

    @field_validator("name")
    @classmethod
    def _name(cls, v):
        if not _NAME.match(v):
            raise ValueError(f"claim name {v!r}: letters, digits, '-' and '_' only")
        return v

    @field_validator("quantity", mode="before")
    @classmethod
    def _quantity(cls, v):
        if isinstance(v, Expression):
            return v
        try:
            return parse(v)
        except ExpressionError as exc:
            raise ValueError(f"quantity {v!r}: {exc}") from None

    @model_validator(mode="after")
    def _threshold(self):
        pair = isinstance(self.threshold, tuple)
        if (self.op == "between") != pair:
            raise ValueError(f"op {self.op!r} with threshold {self.threshold!r}: 'between' takes [low, high], "
                             f"the other comparisons one number")
        if pair and not self.threshold[0] <= self.threshold[1]:
            raise ValueError(f"threshold {list(self.threshold)}: low above high")
        if isinstance(self.states, tuple) and not self.states[0] <= self.states[1]:
            raise ValueError(f"states {list(self.states)}: low above high")
        if self.tolerance and self.states is None:
            raise ValueError("tolerance without states: give the value the docs state")
        stated = self.states if isinstance(self.states, tuple) else () if self.states is None else (self.states,)
        quoted = [v for v in stated if f"{v:g}" not in self.mirrors]
        if quoted:
            raise ValueError(f"states {quoted[0]:g} is not in mirrors ({self.mirrors!r}): a claim states the "
                             f"number its docs give, which its mirrors text quotes")
        return self

    def states_text(self) -> str:
        """The value the docs state: ``1.57 x`` or ``1.02-1.09 x`` (``""``: the claim states none)."""
        if self.states is None:
            return ""
        unit = f" {self.unit}" if self.unit else ""
        if isinstance(self.states, tuple):
            return f"{self.states[0]:g}-{self.states[1]:g}{unit}"
        return f"{self.states:g}{unit}"

    def agrees(self, value: float) -> bool:
        """Whether ``value`` is what the docs state, within ``tolerance`` (absolute, in the claim's unit)."""
        low, high = self.states if isinstance(self.states, tuple) else (self.states, self.states)
        return low - self.tolerance <= value <= high + self.tolerance

    def threshold_text(self) -> str:
        """``>= 1.3`` or ``in [0.95, 1.05]``, with the unit."""
        unit = f" {self.unit}" if self.unit else ""
        if self.op == "between":
            return f"in [{self.threshold[0]:g}, {self.threshold[1]:g}]{unit}"
        return f"{self.op} {self.threshold:g}{unit}"

    def holds(self, value: float) -> bool:
        """Whether ``value`` meets the threshold (NaN never does)."""
        t = self.threshold
        return {">=": lambda: value >= t, "<=": lambda: value <= t, ">": lambda: value > t, "<": lambda: value < t,
                "between": lambda: t[0] <= value <= t[1]}[self.op]()


class Requires(_Model):
    """What a figure needs of the machine beyond hpcbench; unmet, the figure is n/a with the reason."""

    dataset: str | None = Field(None, description="a data set installed apart, by name "
                                                  "(:data:`hpcbench.datasets.installed.INSTALLED`)")

    @field_validator("dataset")
    @classmethod
    def _dataset(cls, v):
        from hpcbench.datasets.installed import INSTALLED

        if v is not None and v not in INSTALLED:
            raise ValueError(f"dataset {v!r}: known data sets are {', '.join(INSTALLED)}")
        return v

    def missing(self) -> str | None:
        """Why the figure cannot run here (None: it can)."""
        from hpcbench.datasets.installed import missing_dataset

        return missing_dataset(self.dataset) if self.dataset is not None else None


class Figure(_Model):
    """One figure: its jobs, the script drawing it, its claims, what it requires."""

    title: str
    paper: str
    jobs: list[Job] = Field(min_length=1)
    analysis: Analysis
    claims: list[Claim] = Field(default_factory=list)
    requires: Requires = Requires()

    @model_validator(mode="after")
    def _references(self):
        ids = [j.id for j in self.jobs]
        if len(set(ids)) != len(ids):
            raise ValueError(f"job ids repeat: {ids}")
        names = [c.name for c in self.claims]
        if len(set(names)) != len(names):
            raise ValueError(f"claim names repeat: {names}")
        jobs = {j.id: j for j in self.jobs}
        for job in self.jobs:
            for source in _from_overrides(job):
                for ref in source.expression.refs:
                    if ref.job not in jobs or ref.job == job.id:
                        raise ValueError(f"job {job.id!r}: override from {source.expression.text!r} reads job "
                                         f"{ref.job!r}, which is not another job of this figure")
                    missing = [t for t in job.tiers if t not in jobs[ref.job].tiers]
                    if missing:
                        raise ValueError(f"job {job.id!r} reads job {ref.job!r}, which does not run in tier "
                                         f"{missing[0]!r}")
        for claim in self.claims:
            for ref in claim.quantity.refs:
                if ref.job not in jobs:
                    raise ValueError(f"claim {claim.name!r} reads job {ref.job!r}; the figure's jobs are "
                                     f"{', '.join(ids)}")
                if not claim.full_only and "quick" not in jobs[ref.job].tiers:
                    raise ValueError(f"claim {claim.name!r} reads job {ref.job!r}, which runs only in the full "
                                     f"tier: mark the claim full_only: true")
        for job_id in self.analysis.inputs or []:
            if job_id not in jobs:
                raise ValueError(f"analysis input {job_id!r} is not a job of this figure ({', '.join(ids)})")
        return self


class Manifest(_Model):
    """Every figure hpcbench regenerates, by name."""

    version: Literal[1] = 1
    figures: dict[str, Figure] = Field(min_length=1)

    @field_validator("figures")
    @classmethod
    def _names(cls, v):
        for name in v:
            if not _NAME.match(name):
                raise ValueError(f"figure name {name!r}: letters, digits, '-' and '_' only")
        return v


def _from_overrides(job: Job):
    values = list(job.overrides.values())
    values += [v for o in job.tier_overrides.values() for v in o.values()]
    values += [v for p in job.points for v in p.overrides.values()]
    return [v for v in values if isinstance(v, FromResults)]


def _location(raw: Any, loc: tuple) -> str:
    """pydantic's error location as ``figures.NAME.jobs[ID].key`` (job and claim lists by their id/name)."""
    out, node = "", raw
    for part in loc:
        if isinstance(part, int):
            item = node[part] if isinstance(node, list) and part < len(node) else None
            label = item.get("id") or item.get("name") if isinstance(item, dict) else None
            out += f"[{label}]" if label else f"[{part}]"
            node = item
        else:
            out += f".{part}" if out else str(part)
            node = node.get(part) if isinstance(node, dict) else None
    return out


def load_manifest(path) -> Manifest:
    """Read and validate a manifest.

    Raises
    ------
    ManifestError
        The file cannot be read, is not YAML, or an entry is wrong; the
        message names the file and the entry.
    """
    import yaml

    from hpcbench.runtime.bounded import read_input
    from hpcbench.runtime.config import load_yaml_text

    path = Path(path)
    try:
        data = read_input(path, "manifest", "manifest", "manifest", gunzip=False)
    except InputError as exc:
        raise ManifestError(str(exc)) from None
    try:
        raw = load_yaml_text(data.decode("utf-8"), str(path))
    except UnicodeDecodeError as exc:
        raise ManifestError(f"{path}: the manifest is not UTF-8 text (byte {exc.start})") from None
    except InputError as exc:
        raise ManifestError(str(exc)) from None
    except yaml.YAMLError as exc:
        raise ManifestError(f"{path}: not YAML: {exc}") from None
    if not isinstance(raw, dict):
        raise ManifestError(f"{path}: the top level must be a mapping with 'figures'")
    raw = {k: v for k, v in raw.items() if not str(k).startswith("x-")}   # holders of YAML anchors
    try:
        return Manifest.model_validate(raw)
    except ValidationError as err:
        lines = []
        for e in err.errors()[:8]:
            where = _location(raw, tuple(e["loc"]))
            msg = e["msg"].removeprefix("Value error, ")
            if e["type"] == "extra_forbidden":
                msg = "unknown key"
            lines.append(f"{path}: {where or '(top level)'}: {msg}")
        raise ManifestError("\n".join(lines)) from None

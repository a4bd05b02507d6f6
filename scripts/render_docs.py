#!/usr/bin/env python3
"""Rewrite the docs' generated blocks from the result files kept under ``docs/measured/``.

``python scripts/render_docs.py [--check] [--audit] [--root DIR]``

A generated block in ``README.md`` or ``docs/*.md`` is marked::

    <!-- generated: NAME -->
    ...
    <!-- /generated -->

and is rendered by the Jinja2 template ``docs/templates/NAME.md.j2`` from
``docs/measured/NAME.json`` (written by ``scripts/keep_results.py``), followed
by a line naming the file and its provenance. Every kept file must carry the
provenance of :data:`PROVENANCE`, and ``docs/measured/`` must stay within its
budget (:data:`BUDGET_BYTES` in all, :data:`FILE_BUDGET_BYTES` a file;
``docs/measured/README.md``).

A table of measured numbers that no kept file backs carries a label on the
line before it instead: ``<!-- measured: commit C, MACHINE, DATE; no file:
REASON -->`` (or ``; file: docs/measured/PATH`` for a table typed from a kept
file that no template renders yet). A reference table whose decimals are not
measurements (defaults, formulas) says so: ``<!-- not measured: REASON -->``.
``--audit`` counts the generated blocks, the labelled tables and the tables
with numbers that have neither, and lists the last; then the prose
paragraphs that state a measurement-like number (a decimal followed by
``x``, ``%`` or a unit of time, rate or bandwidth: ``1.53x``, ``37.7 s``,
``3.2 GB/s``) and carry no label: no commit named in the paragraph, no link
to ``docs/measured/``, no ``measured:``/``not measured:`` comment right
before it, and no labelled table or generated block right after it (the
table it introduces) or earlier in its section (prose that quotes a table
shares its label). The prose list is a report,
not part of ``--check``: settings and targets (``0.174 s`` of emulated
compute, a spin bound of ``0.5 ms``) read like measurements to a pattern.

Without options: rewrite the blocks in place. ``--check``: rewrite nothing;
exit 1 when a block differs from what its sources render, a source lacks
provenance, or the budget is exceeded (CI runs it); each problem is named.
Exit status 2 on a block whose template or source is missing.
"""

from __future__ import annotations

import argparse
import json
import math
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

#: what every kept file's provenance names
PROVENANCE = ("commit", "host", "cpu", "cores", "load", "command", "date", "timing")

#: docs/measured/ in all, and any one file in it
BUDGET_BYTES = 4 * 2 ** 20
FILE_BUDGET_BYTES = 512 * 2 ** 10

_BLOCK = re.compile(r"(<!-- generated: ([A-Za-z0-9_.-]+) -->\n)(.*?)(<!-- /generated -->)", re.S)
_LABEL = re.compile(r"<!-- measured: .*commit [0-9a-f]{7,40}.*; (no file: .+|file: docs/measured/\S+.*)-->")
_TABLE_ROW = re.compile(r"^ {0,3}\|.*\|\s*$")         # a table, also one indented in a list item
_NUMBER = re.compile(r"(?<![\w.])\d+\.\d+")        # a decimal: what a measurement prints
_CODE = re.compile(r"`[^`]*`")
#: a number as a measurement prints it in prose: a decimal with x, % or a unit of time, rate or bandwidth
_PROSE_NUMBER = re.compile(r"(?<![\w.])\d+\.\d+(?:x\b| ?(?:ms|µs|us|s|GB/s|MB/s|img/s|samples/s|%)(?!\w))")
#: a commit named in prose: ``commit 1659205``, ``at 3f9eff0`` (hex with a letter and a digit)
_PROSE_COMMIT = re.compile(r"\bcommit [0-9a-f]{7,40}\b|\b(?=[0-9a-f]*[a-f])(?=[0-9a-f]*[0-9])[0-9a-f]{7,40}\b")
_FENCE = re.compile(r"```.*?```", re.S)
_DATE = re.compile(r"\b20\d\d-\d\d-\d\d\b")


class RenderError(Exception):
    """A block that cannot be rendered: its template or source is missing or unreadable."""


def _docs(root: Path) -> list[Path]:
    return [p for p in [root / "README.md", *sorted((root / "docs").glob("*.md"))] if p.is_file()]


def _mean(values) -> float:
    """Mean of the known values (None: a target not reached), NaN when none is known."""
    vals = [v for v in values if v is not None]
    return sum(vals) / len(vals) if vals else math.nan


def _known(values) -> int:
    return sum(v is not None for v in values)


def _environment(root: Path):
    from jinja2 import Environment, FileSystemLoader, StrictUndefined

    env = Environment(loader=FileSystemLoader(str(root / "docs" / "templates")), undefined=StrictUndefined,
                      keep_trailing_newline=True, trim_blocks=True, lstrip_blocks=True)
    env.filters["mean"] = lambda values: _mean(list(values))
    env.filters["known"] = lambda values: _known(list(values))
    env.filters["num"] = lambda v, fmt="{:.0f}", missing="-": missing if v is None or (
        isinstance(v, float) and math.isnan(v)) else fmt.format(v)
    return env


def load_source(root: Path, name: str) -> dict:
    """``docs/measured/NAME.json``, its provenance checked.

    Raises
    ------
    RenderError
        The file is missing or not JSON.
    ValueError
        Its provenance lacks a field of :data:`PROVENANCE` (the message names it).
    """
    path = root / "docs" / "measured" / f"{name}.json"
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise RenderError(f"{path.relative_to(root)}: {exc}") from None
    prov = data.get("provenance") or {}
    missing = [k for k in PROVENANCE if prov.get(k) in (None, "")]
    if missing:
        raise ValueError(f"{path.relative_to(root)}: provenance lacks {', '.join(missing)}")
    return data


def _commits(prov: dict) -> str:
    """``commit 740279c``, or for runs of several commits ``commits 78c3d76 (12 runs), 57518ea (1 run)``."""
    counts = prov.get("commits") or {}
    if len(counts) < 2:
        return f"commit {prov['commit'][:7]}"
    return "commits " + ", ".join(f"{c[:7]} ({n} run{'s' if n != 1 else ''})" for c, n in counts.items())


def _footer(name: str, prov: dict) -> str:
    kind = ("wall-time measurements, taken at that load" if prov["timing"]
            else "not wall-time measurements: the machine's load does not change them")
    return (f"<sub>Generated by `scripts/render_docs.py` from `docs/measured/{name}.json` "
            f"(`{prov['command']}`): {_commits(prov)}, {prov['host']} ({prov['cpu']}, {prov['cores']} "
            f"cores), {prov['date']}, {prov['load']}; {kind}.</sub>\n")


def render_block(root: Path, name: str, env=None) -> str:
    """The text of block ``name`` as its template renders it from its source, footer included."""
    from jinja2 import TemplateNotFound

    data = load_source(root, name)
    env = env or _environment(root)
    runs = data["runs"]

    def select(**where):
        return [r for r in runs if all(r.get(k) == v for k, v in where.items())]

    try:
        template = env.get_template(f"{name}.md.j2")
    except TemplateNotFound:
        raise RenderError(f"docs/templates/{name}.md.j2: no template for block {name!r}") from None
    text = template.render(runs=runs, select=select, provenance=data["provenance"])
    return text.rstrip("\n") + "\n\n" + _footer(name, data["provenance"])


def check_budget(root: Path) -> list[str]:
    """Problems with docs/measured/'s size (empty: within budget)."""
    folder = root / "docs" / "measured"
    files = [p for p in folder.rglob("*") if p.is_file()] if folder.is_dir() else []
    problems = [f"{p.relative_to(root)}: {p.stat().st_size / 1024:.0f} KiB, over the {FILE_BUDGET_BYTES // 1024} "
                f"KiB a kept file may take" for p in files if p.stat().st_size > FILE_BUDGET_BYTES]
    total = sum(p.stat().st_size for p in files)
    if total > BUDGET_BYTES:
        problems.append(f"docs/measured/: {total / 2 ** 20:.2f} MiB, over its {BUDGET_BYTES / 2 ** 20:.0f} MiB budget")
    return problems


def process(root: Path, check: bool) -> list[str]:
    """Render every block (rewriting files unless ``check``); returns the problems found."""
    env = _environment(root)
    problems = check_budget(root)
    for doc in _docs(root):
        text = doc.read_text(encoding="utf-8")

        def replace(m):
            try:
                body = render_block(root, m.group(2), env)
            except ValueError as exc:
                problems.append(f"{doc.relative_to(root)}: block {m.group(2)}: {exc}")
                return m.group(0)
            if body != m.group(3):
                problems.append(f"{doc.relative_to(root)}: block {m.group(2)} differs from what its sources render"
                                f" (run scripts/render_docs.py)")
            return m.group(1) + body + m.group(4)

        new = _BLOCK.sub(replace, text)
        if not check and new != text:
            doc.write_text(new, encoding="utf-8")
    if not check:
        problems = [p for p in problems if "differs from" not in p]
    return problems


def audit(root: Path) -> tuple[int, int, list[str]]:
    """(generated blocks, labelled tables, ``FILE:LINE`` of each table with numbers that is neither).

    A table "with numbers" has at least two decimals (``1.57``, ``0.953``) outside code spans in its
    rows: what a measurement prints, unlike a reference table of keys, types and defaults.
    """
    generated = labelled = 0
    bare = []
    for doc in _docs(root):
        lines = doc.read_text(encoding="utf-8").splitlines()
        inside = False
        i = 0
        while i < len(lines):
            line = lines[i]
            if line.startswith("<!-- generated:"):
                generated, inside = generated + 1, True
            elif line.startswith("<!-- /generated -->"):
                inside = False
            if _TABLE_ROW.match(line) and not inside:
                start = i
                while i < len(lines) and _TABLE_ROW.match(lines[i]):
                    i += 1
                body = lines[start + 2:i]
                prev = next((lines[j] for j in range(start - 1, -1, -1) if lines[j].strip()), "")
                if _LABEL.search(prev):
                    labelled += 1
                elif prev.startswith("<!-- not measured:"):
                    pass
                elif sum(len(_NUMBER.findall(_CODE.sub("", row))) for row in body) >= 2:
                    bare.append(f"{doc.relative_to(root)}:{start + 1}")
                continue
            i += 1
    return generated, labelled, bare


def audit_prose(root: Path) -> list[str]:
    """``FILE:LINE: NUMBERS`` of each prose paragraph with measurement-like numbers and no label.

    A paragraph is a run of non-blank lines outside code fences, tables, headings and indented code.
    It is labelled when it names a commit or links ``docs/measured/``, when a ``<!-- measured: -->`` or
    ``<!-- not measured: -->`` comment stands right before it, when it introduces a labelled table or
    generated block (the next thing after it), or when one comes earlier in the same section (under
    the same heading), as does a paragraph naming a commit and a date (it labels the readings after it).
    """
    unlabelled = []
    for doc in _docs(root):
        text = _FENCE.sub(lambda m: "\n" * m.group(0).count("\n"), doc.read_text(encoding="utf-8"))
        lines = text.split("\n")
        section_label = comment = False
        i = 0
        while i < len(lines):
            line = lines[i]
            stripped = line.lstrip()
            if line.startswith("#"):
                section_label = comment = False
            elif stripped.startswith(("<!-- measured:", "<!-- generated:", "<!-- not measured:")):
                comment = True
                if not stripped.startswith("<!-- not measured:"):
                    section_label = True
            if not stripped or line.startswith(("#", "    ")) or stripped.startswith("<!--") or _TABLE_ROW.match(line):
                if stripped and not stripped.startswith("<!--"):
                    comment = False
                i += 1
                continue
            j = i
            while j < len(lines) and lines[j].strip() and not (lines[j].startswith("#") or _TABLE_ROW.match(lines[j])
                                                               or lines[j].lstrip().startswith("<!--")):
                j += 1
            paragraph = " ".join(lines[i:j])
            numbers = _PROSE_NUMBER.findall(_CODE.sub("", paragraph))
            after = next((lines[k].lstrip() for k in range(j, len(lines)) if lines[k].strip()), "")
            introduces = after.startswith(("<!-- measured:", "<!-- generated:"))
            named = _PROSE_COMMIT.search(paragraph)
            if numbers and not (comment or section_label or introduces or "measured/" in paragraph or named):
                unlabelled.append(f"{doc.relative_to(root)}:{i + 1}: {', '.join(numbers[:4])}"
                                  f"{' ...' if len(numbers) > 4 else ''}")
            if named and _DATE.search(paragraph):
                section_label = True          # a paragraph naming commit and date labels the readings after it
            comment = False
            i = j
    return unlabelled


def main(argv: list[str] | None = None) -> int:
    """Run the command; returns the exit status."""
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[1])
    p.add_argument("--check", action="store_true", help="rewrite nothing; exit 1 on a stale block or bad source")
    p.add_argument("--audit", action="store_true", help="count generated, labelled and unlabelled tables")
    p.add_argument("--root", type=Path, default=ROOT, help="the repository (default: this one)")
    args = p.parse_args(argv)
    root = args.root.resolve()
    if args.audit:
        generated, labelled, bare = audit(root)
        print(f"generated blocks: {generated}; labelled tables: {labelled}; tables with numbers neither generated "
              f"nor labelled: {len(bare)}")
        for where in bare:
            print(f"  {where}")
        prose = audit_prose(root)
        print(f"prose paragraphs with measurement-like numbers and no label (a report, not checked): {len(prose)}")
        for where in prose:
            print(f"  {where}")
        return 0
    try:
        problems = process(root, args.check)
    except RenderError as exc:
        print(f"render_docs: error: {exc}", file=sys.stderr)
        return 2
    for problem in problems:
        print(f"render_docs: {problem}", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""Keep the results of a reproduction in the repository: a compact extract under ``docs/measured/``.

``python scripts/keep_results.py OUT NAME --tier quick|full --timing|--no-timing [--figures F ...] [--load-log FILE]
[--manifest FILE] [--tables TABLE ...] [--across-commits]``

Reads the results files of ``hpcbench reproduce``'s output folder ``OUT``
(``OUT/runs/FIGURE/RUN.h5``, every completed run of the chosen figures) and
its ledger, and writes ``docs/measured/NAME.json``: each run's scalar root
attributes (``time_to_accuracy_s``, ``final_test_accuracy``, ``seed``, ...;
not the config, host list or run ids), and the rows of the tables named by
``--tables`` (at most :data:`MAX_ROWS` each, under the run's ``tables``),
with the provenance the docs' numbers
need (:data:`PROVENANCE`): the commit of every file (one commit, clean, or
the script refuses; with ``--across-commits``, several clean commits, each
named with its number of runs: a reproduction that kept files made by other
code with ``--reuse``), the host, CPU and cores, the load while the runs ran,
the reproduce command (with ``--manifest`` when the runs came from a
manifest other than ``jobs/reproduce.yaml``), the dates, and whether the numbers are wall-time
measurements (then the load matters) or not (virtual times, accuracies).

The load comes from the ledger's ``load_average`` (recorded at the end of
each run since the ledger records it) or from ``--load-log``, lines of
``ISO-TIME LOAD1 LOAD5 LOAD15 ...`` sampled while the runs ran.

``scripts/render_docs.py`` renders the docs' generated blocks from these
files. Exit status 2 on bad input (the message names it), nothing written.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import math
import platform
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

#: what every kept file's provenance names (``scripts/render_docs.py --check`` refuses a file without one)
PROVENANCE = ("commit", "host", "cpu", "cores", "load", "command", "date", "timing")

#: the most rows a kept table may have (a compact extract: a table longer than this is a data set, not a doc's rows)
MAX_ROWS = 200

#: root attributes not kept: configs (the command and the commit give them), per-process identifiers
_DROPPED = ("config", "config_json", "config_yaml", "hostnames", "run_id", "writer_pid", "heartbeat",
            "final_parameters_sha256", "fedscale_notes", "fault_injection", "slurm_job_id")


def _in_out(value, out: Path):
    """A path under the output folder as ``OUT/...`` (a kept file names no machine's folders); others as they are."""
    if isinstance(value, str):
        for root in {str(out), str(out.resolve())}:
            if value == root or value.startswith(root + "/"):
                return "OUT" + value[len(root):]
    return value


def _plain(value):
    """An attribute as JSON: numbers (NaN and infinities as None), strings, booleans; None for arrays."""
    if hasattr(value, "item") and getattr(value, "ndim", 0) == 0:
        value = value.item()
    if isinstance(value, bytes):
        value = value.decode()
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, (bool, int, str)):
        return value
    return None


def _rows(h5, path: Path, name: str) -> list[dict]:
    """Table ``name`` of an open results file as a list of rows (plain JSON values)."""
    from hpcbench.results.reader import read_table

    try:
        table = read_table(h5, name)
    except KeyError:
        raise SystemExit(f"keep_results: {path}: no table {name!r} (--tables)") from None
    columns = list(table)
    count = len(table[columns[0]]) if columns else 0
    if count > MAX_ROWS:
        raise SystemExit(f"keep_results: {path}: table {name!r} has {count} rows, more than the {MAX_ROWS} a kept "
                         f"extract may hold (--tables)")
    return [{c: _plain(table[c][i]) for c in columns} for i in range(count)]


def _time(text: str) -> dt.datetime:
    return dt.datetime.fromisoformat(text.replace("Z", "+00:00"))


def _load(ledger_entries: list[dict], load_log: Path | None, start: str, end: str) -> str:
    values = [e["load_average"][0] for e in ledger_entries if e.get("load_average")]
    how = "at the end of each run"
    if not values and load_log is not None:
        t0, t1 = _time(start), _time(end)
        for line in load_log.read_text(encoding="utf-8").splitlines():
            parts = line.split()
            if len(parts) >= 2 and t0 <= _time(parts[0]) <= t1:
                values.append(float(parts[1]))
        how = "sampled over the runs"
    if not values:
        raise SystemExit("keep_results: no load recorded: the ledger has no load_average and no --load-log was "
                         "given (the load is part of every kept file's provenance)")
    return (f"1-minute load average {min(values):.1f}-{max(values):.1f} (mean {sum(values) / len(values):.1f}), "
            f"{how}")


def keep(out: Path, name: str, figures: list[str] | None, load_log: Path | None, timing: bool, tier: str,
         manifest: str | None = None, tables: list[str] | None = None, across_commits: bool = False) -> dict:
    """The extract of ``out``'s completed runs (of ``figures``; default all) as a JSON-ready dict.

    ``manifest``: the manifest the runs came from (recorded in the command; None: the default one).
    ``tables``: names of tables whose rows are kept with each run (every run must have them).
    ``across_commits``: accept files of several clean commits (``hpcbench reproduce --reuse`` keeps files
    made by other code); the provenance's ``commit`` then names them all, oldest first, and ``commits``
    counts the runs of each. Each run keeps its own ``git_commit`` either way.
    """
    from hpcbench.reproduce.machine import describe_machine
    from hpcbench.results.reader import open_file, read_attrs

    ledger = out / "ledger.jsonl"
    if not ledger.is_file():
        raise SystemExit(f"keep_results: {ledger}: no ledger (OUT must be an hpcbench reproduce output folder)")
    entries = [json.loads(line) for line in ledger.read_text(encoding="utf-8").splitlines() if line.strip()]
    last = {e["output"]: e for e in entries if e.get("kind") == "run" and e.get("rc") == 0}
    runs, commits, hosts, used = [], set(), set(), []
    for path in sorted((out / "runs").glob("*/*.h5")):
        figure = path.parent.name
        if figures and figure not in figures:
            continue
        with open_file(path) as h5:
            attrs = read_attrs(h5)
            if attrs.get("status") != "completed" or str(path) not in last:
                continue
            rows = {t: _rows(h5, path, t) for t in tables or []}
        commits.add(str(attrs.get("git_commit", "")))
        hosts.add(str(attrs.get("writer_host", "")))
        used.append(last[str(path)])
        kept = {k: _in_out(_plain(v), out) for k, v in sorted(attrs.items())
                if k not in _DROPPED and not k.endswith("_version")}
        runs.append({"figure": figure, "run": path.stem, "job": re.sub(r"-s\d+$", "", path.stem), **kept,
                     **({"tables": rows} if rows else {})})
    if not runs:
        raise SystemExit(f"keep_results: no completed run of {figures or 'any figure'} under {out / 'runs'}")
    unclean = sorted(c for c in commits if not c or c.endswith("-dirty"))
    if unclean or (len(commits) != 1 and not across_commits):
        raise SystemExit(f"keep_results: the files were made by {sorted(commits)}: keep only files of one clean "
                         f"commit{' (or of several clean ones, with --across-commits)' if not unclean else ''}")
    first_seen = {c: min(r["start_time"] for r in runs if r.get("git_commit") == c) for c in commits}
    ordered = sorted(commits, key=lambda c: (first_seen[c], c))
    start = min(r["start_time"] for r in runs)
    end = max(r.get("end_time") or r["start_time"] for r in runs)
    machine = describe_machine()
    host = next(iter(hosts))
    shown_figures = sorted({r["figure"] for r in runs})
    return {
        "name": name,
        "provenance": {
            "commit": ", ".join(ordered), "host": host,
            **({"commits": {c: sum(r.get("git_commit") == c for r in runs) for c in ordered}}
               if len(ordered) > 1 else {}),
            "cpu": machine["cpu"] if host == platform.node() else "not recorded",
            "cores": machine["logical_cores"] if host == platform.node() else "not recorded",
            "load": _load(used, load_log, start, end),
            "command": f"hpcbench reproduce {f'--manifest {manifest} ' if manifest else ''}"
                       f"{' '.join(shown_figures)} --tier {tier}{' --reuse' if len(ordered) > 1 else ''}",
            "date": f"{start} to {end}", "timing": timing,
            "versions": {k: machine["versions"].get(k, "") for k in ("numpy", "torch", "mpi4py")},
        },
        "runs": runs,
    }


def main(argv: list[str] | None = None) -> int:
    """Write ``docs/measured/NAME.json``; returns the exit status."""
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[1])
    p.add_argument("out", type=Path, help="an hpcbench reproduce output folder")
    p.add_argument("name", help="the extract's name: docs/measured/NAME.json")
    p.add_argument("--figures", nargs="+", default=None, help="only these figures' runs")
    p.add_argument("--load-log", type=Path, default=None, help="ISO-TIME LOAD1 ... lines sampled during the runs")
    p.add_argument("--tier", choices=("quick", "full"), required=True, help="the tier the reproduction ran")
    p.add_argument("--timing", action=argparse.BooleanOptionalAction, required=True,
                   help="whether the kept numbers are wall-time measurements (the load then matters)")
    p.add_argument("--manifest", default=None,
                   help="the manifest the runs came from, as given to hpcbench reproduce (default: jobs/reproduce.yaml)")
    p.add_argument("--tables", nargs="+", default=None, help=f"also keep these tables' rows (at most {MAX_ROWS} each)")
    p.add_argument("--across-commits", action="store_true",
                   help="accept files of several clean commits (kept by reproduce --reuse); each is named")
    p.add_argument("--dest", type=Path, default=ROOT / "docs" / "measured")
    args = p.parse_args(argv)
    try:
        extract = keep(args.out, args.name, args.figures, args.load_log, args.timing, args.tier, args.manifest,
                       args.tables, args.across_commits)
    except SystemExit as exc:
        print(exc, file=sys.stderr)
        return 2
    path = args.dest / f"{args.name}.json"
    tmp = path.with_suffix(".json.tmp")
    args.dest.mkdir(parents=True, exist_ok=True)
    tmp.write_text(json.dumps(extract, indent=1, sort_keys=False) + "\n", encoding="utf-8")
    tmp.replace(path)
    print(f"{path}: {len(extract['runs'])} runs, {path.stat().st_size / 1024:.0f} KiB")
    return 0


if __name__ == "__main__":
    sys.exit(main())

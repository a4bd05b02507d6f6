"""Reading hpcbench training result files (kind ``train``) for the figure scripts; never imports MPI."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from _style import figure_parser, load_all

from hpcbench.results import read_attrs, read_table

__all__ = ["figure_arguments", "load_runs", "summary_rows"]


def figure_arguments(argv, doc: str, default_output: str):
    """Parse a figure script's command line: result files and ``-o/--output`` (repeatable)."""
    return figure_parser(doc, default_output, "hpcbench train result files (.h5)").parse_args(argv)


def _load(path: Path) -> dict:
    attrs = read_attrs(path)
    if attrs.get("kind") != "train":
        raise ValueError(f"{path}: kind {attrs.get('kind')!r}, expected 'train'")
    return {"path": path, "attrs": attrs, "summary": read_table(path, "summary")}


def load_runs(paths, prog: str) -> list[dict]:
    """Attributes and ``summary`` table of every file; raises ``SystemExit(2)`` with one line on a bad file."""
    return load_all([Path(p) for p in paths], _load, prog)


def summary_rows(runs: list[dict]) -> list[dict]:
    """One dict per completed (file, synchroniser, variant) summary row, with the file's attributes.

    ``schedule`` is ``fifo`` or ``priority`` (without the order) and ``line`` the
    label of the synchroniser's line in a figure (``"ring, priority"``).
    """
    rows = []
    for run in runs:
        s, a = run["summary"], run["attrs"]
        for i in range(len(s["sync"])):
            if not str(s["status"][i]).startswith("ok"):
                continue
            row = {k: (v[i].decode() if isinstance(v[i], bytes) else v[i]) for k, v in s.items()}
            row.update(model=str(a.get("model")), link=str(a.get("link_model")), workers=int(s["workers"][i]),
                       compute=str(a.get("compute_mode")), dilation=float(a.get("time_dilation", np.nan)),
                       path=str(run["path"]))
            row["schedule"] = str(row.get("schedule", "fifo")).split()[0]   # files before the priority schedule
            base = str(row["sync"]).partition(":")[0]          # "ring:priority" entries carry it in the name
            row["line"] = base if row["schedule"] == "fifo" else f"{base}, {row['schedule']}"
            rows.append(row)
    return rows

"""Pipeline figures: iteration time and speedup per allocator and stage count, bubble, timeline.

Usage::

    python analysis/plot_pipeline.py results/pipeline-*.h5 -o results/pipeline.png

Reads hpcbench pipeline result files (kind ``pipeline``), groups them by
``job_name`` (one line per allocator and group against the stage count),
and draws three panels:

1. measured iteration time per allocator against the stage count (solid),
   with the predicted time (dotted), and the speedup over ``even`` printed;
2. the measured bubble fraction of every run against ``(p - 1)/(m + p - 1)``
   (GPipe; the runs with equal device speeds and the ``even`` split are the
   ones where the formula applies);
3. the timeline of one iteration, stage by stage (forward, backward,
   waiting for input), of the last file's last allocator (``--timeline``
   picks a file and allocator).

Also prints one table row per run. Never imports MPI.
"""

from __future__ import annotations

import sys
from collections import defaultdict
from pathlib import Path

import numpy as np
from _style import color_for, figure_parser, finish, load_all, pyplot

from hpcbench.results import read_attrs, read_table
from hpcbench.runtime.texttable import render


def load_run(path: Path) -> dict:
    """Attributes and tables of one pipeline result file.

    Raises
    ------
    ValueError
        If the file is not a pipeline result file.
    """
    attrs = read_attrs(path)
    if attrs.get("kind") != "pipeline":
        raise ValueError(f"{path}: kind {attrs.get('kind')!r}, expected 'pipeline'")
    return {"path": path, "attrs": attrs, "alloc": read_table(path, "allocations"),
            "iters": read_table(path, "iterations"), "timeline": read_table(path, "timeline")}


def summary_rows(runs: list[dict]) -> list[dict]:
    """One row per (file, allocator): stages, predicted, measured, error, speedup over even."""
    rows = []
    for run in runs:
        a = run["alloc"]
        names = [str(n) for n in a["allocator"]]
        even = a["measured_iteration_s"][names.index("even")] if "even" in names else np.nan
        it = run["iters"]
        for i, name in enumerate(names):
            sel = (np.asarray(it["allocator"]).astype(str) == name) & ~np.asarray(it["warmup"], bool)
            rows.append(dict(group=run["attrs"].get("job_name", ""), stages=int(a["stages"][i]), allocator=name,
                             predicted=float(a["predicted_iteration_s"][i]),
                             measured=float(a["measured_iteration_s"][i]),
                             speedup=float(even / a["measured_iteration_s"][i]),
                             bubble=float(np.median(it["bubble_fraction"][sel])) if sel.any() else np.nan,
                             m=int(run["attrs"].get("micro_batches", 0)), schedule=run["attrs"].get("schedule", "")))
    return rows


def main(argv: list[str] | None = None) -> int:
    """Draw the figure and print the table; returns the exit status."""
    ap = figure_parser(__doc__, "results/pipeline.png", "hpcbench pipeline result files (.h5)")
    ap.add_argument("--timeline", default=None, metavar="FILE:ALLOCATOR",
                    help="run and allocator of the timeline panel (default: last file, last allocator)")
    args = ap.parse_args(argv)
    try:
        runs = load_all(args.files, load_run, "plot_pipeline")
    except SystemExit as exc:
        return int(exc.code)
    rows = summary_rows(runs)
    table = []
    for r in sorted(rows, key=lambda r: (r["group"], r["stages"], r["allocator"])):
        p, m = r["stages"], r["m"]
        table.append((r["group"], p, r["allocator"], r["predicted"], r["measured"],
                      100 * (r["measured"] / r["predicted"] - 1), r["speedup"], r["bubble"],
                      (p - 1) / (m + p - 1)))
    for line in render(("group", "stages", "allocator", "predicted", "measured", "error", "speed-up", "bubble",
                        "(p-1)/(m+p-1)"), table, units=("", "", "", "(s)", "(s)", "(%)", "(x even)", "", ""),
                       formats=("s", "d", "s", ".4g", ".4g", "+.1f", ".2f", ".3f", ".3f")):
        print(line)
    plt = pyplot()
    fig, axes = plt.subplots(1, 3, figsize=(17, 4.8))
    lines = defaultdict(list)
    for r in rows:
        lines[(r["group"], r["allocator"])].append(r)
    ax = axes[0]
    group_names = sorted({g for g, _ in lines})
    for (group, name), rs in sorted(lines.items()):
        rs.sort(key=lambda r: r["stages"])
        x = [r["stages"] for r in rs]
        marker = "osd^v<>"[group_names.index(group) % 7]
        (h,) = ax.plot(x, [r["measured"] for r in rs], marker=marker, linestyle="-", color=color_for(name),
                       label=f"{group}: {name}")
        ax.plot(x, [r["predicted"] for r in rs], ":", color=h.get_color())
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("pipeline stages")
    ax.set_ylabel("iteration time (s, modelled); dotted: predicted")
    ax.legend(fontsize=6)
    ax.set_title("iteration time per allocator")
    ax = axes[1]
    for r in rows:
        formula = (r["stages"] - 1) / (r["m"] + r["stages"] - 1)
        ax.scatter(formula, r["bubble"], s=14, marker="o" if r["allocator"] == "even" else "x")
    ax.plot([0, 1], [0, 1], "k--", lw=0.8, label="measured = (p-1)/(m+p-1)")
    ax.set_xlabel("(p - 1) / (m + p - 1)")
    ax.set_ylabel("measured bubble fraction")
    ax.set_title("bubble (o: even split, x: other allocators)")
    ax.legend(fontsize=7)
    if args.timeline:
        fname, _, alloc_name = args.timeline.rpartition(":")
        run = next(r for r in runs if str(r["path"]) == fname)
    else:
        run = runs[-1]
        alloc_name = str(run["alloc"]["allocator"][-1])
    tl = run["timeline"]
    sel = np.asarray(tl["allocator"]).astype(str) == alloc_name
    ax = axes[2]
    for stage, action, ready, start, end in zip(tl["stage"][sel], np.asarray(tl["action"])[sel].astype(str),
                                                tl["ready_s"][sel], tl["start_s"][sel], tl["end_s"][sel]):
        if start > ready:
            ax.broken_barh([(ready, start - ready)], (stage - 0.4, 0.8), color="0.85")
        ax.broken_barh([(start, end - start)], (stage - 0.4, 0.8), color="tab:blue" if action == "F" else "tab:orange")
    ax.invert_yaxis()
    ax.set_xlabel("time in the iteration (s, modelled)")
    ax.set_ylabel("stage")
    ax.set_title(f"{run['attrs'].get('job_name', '')} {alloc_name}: forward (blue), backward (orange), "
                 f"waiting (grey)", fontsize=8)
    return finish(fig, args)


if __name__ == "__main__":
    sys.exit(main())

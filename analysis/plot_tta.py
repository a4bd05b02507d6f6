"""Time-to-accuracy figure: test accuracy against virtual time and against rounds.

Usage::

    python analysis/plot_tta.py results/*.h5 -o results/tta.png [-o results/tta.pdf]

Reads hpcbench federated result files (kind ``fl``; schema in
docs/results-schema.md), draws one line per file in two panels (virtual hours,
rounds) with the target accuracy as a dashed line and each run's
time-to-accuracy marked, and prints a one-line summary per file. Never imports
MPI.
"""

from __future__ import annotations

import math
import sys
from pathlib import Path

import numpy as np
from _style import figure_parser, load_all, outputs, pyplot, save_figure

from hpcbench.results import read_attrs, read_table


def load_run(path: Path) -> dict:
    """Evaluated rounds of one result file plus its summary attributes.

    Raises
    ------
    ValueError
        If the file is not a federated (kind ``fl``) result file.
    """
    attrs = read_attrs(path)
    if attrs.get("kind") != "fl":
        raise ValueError(f"{path}: kind {attrs.get('kind')!r}, expected 'fl'")
    rounds = read_table(path, "rounds")
    evaluated = ~np.isnan(rounds["test_accuracy"])
    label = f"{attrs.get('job_name', path.stem)} (np={attrs.get('world_size', '?')})"
    return {
        "label": label,
        "round": rounds["round"][evaluated],
        "hours": rounds["virtual_time_s"][evaluated] / 3600.0,
        "accuracy": rounds["test_accuracy"][evaluated],
        "target": float(attrs.get("target_accuracy", math.nan)),
        "tta_s": float(attrs.get("time_to_accuracy_s", math.nan)),
        "rta": int(attrs.get("rounds_to_accuracy", -1)),
        "status": attrs.get("status", "?"),
    }


def plot(runs: list[dict], out, target: float | None = None, title: str | None = None) -> None:
    """Draw accuracy vs virtual time and vs rounds for ``runs`` into ``out`` (a path or paths: PNG, PDF, SVG)."""
    plt = pyplot()
    fig, (ax_t, ax_r) = plt.subplots(1, 2, figsize=(11, 4.2), constrained_layout=True)
    for run in runs:
        (line,) = ax_t.plot(run["hours"], run["accuracy"], marker=".", label=run["label"])
        ax_r.plot(run["round"], run["accuracy"], marker=".", color=line.get_color(), label=run["label"])
        if run["rta"] > 0:
            ax_t.axvline(run["tta_s"] / 3600.0, color=line.get_color(), linestyle=":", linewidth=1)
            ax_r.axvline(run["rta"], color=line.get_color(), linestyle=":", linewidth=1)
    goal = target if target is not None else next((r["target"] for r in runs if not math.isnan(r["target"])), None)
    for ax in (ax_t, ax_r):
        accuracy_axis(ax, goal)
    ax_t.set_xlabel("virtual time (hours)")
    ax_r.set_xlabel("round")
    ax_r.legend(loc="lower right", fontsize=8)
    fig.suptitle(title or "Time-to-accuracy")
    save_figure(fig, out)


def accuracy_axis(ax, goal: float | None) -> None:
    """Test accuracy in [0, 1] on the y axis, a grid, and the target as a dashed line (unless None)."""
    if goal is not None:
        ax.axhline(goal, color="black", linestyle="--", linewidth=1, label=f"target {goal:.2f}")
    ax.set_ylabel("test accuracy")
    ax.set_ylim(0, 1)
    ax.grid(alpha=0.3)


def main(argv: list[str] | None = None) -> int:
    parser = figure_parser(__doc__, "results/tta.png", "hpcbench fl result files (.h5)")
    parser.add_argument("--target", type=float, default=None, help="target accuracy (default: from the files)")
    parser.add_argument("--title", default=None)
    args = parser.parse_args(argv)
    try:
        runs = load_all(args.files, load_run, "plot_tta")
    except SystemExit as exc:
        return int(exc.code)
    for run in runs:
        tta = (f"{run['tta_s'] / 3600:.2f} h virtual, round {run['rta']}" if run["rta"] > 0 else "not reached")
        best = f"{np.max(run['accuracy']):.4f}" if len(run["accuracy"]) else "n/a (no evaluated round)"
        target = f"{run['target']:.2f}" if run["target"] == run["target"] else "(no target)"
        print(f"{run['label']}: status {run['status']}, best accuracy {best}, "
              f"time-to-accuracy {target}: {tta}")
    plot(runs, outputs(args), args.target, args.title)
    print(f"figure: {', '.join(map(str, outputs(args)))}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

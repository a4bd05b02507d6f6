"""Compare federated strategies across seeds: time-to-accuracy per selector or server optimizer.

Usage::

    python analysis/fl_compare.py results/fl/select-*.h5 --by selection -o results/fl/selection.png
    python analysis/fl_compare.py results/fl/opt-*.h5 --by aggregator -o results/fl/aggregators.png

Groups hpcbench federated result files by the strategy named in their config
(``selection.name`` or ``aggregator.name``), draws test accuracy against
virtual hours (one colour per strategy, one line per seed, the target as a
dashed line), and prints per strategy the runs, how many reached the target,
the mean virtual time to it over those, and the baseline's mean divided by it
(speed-up; > 1 is faster than the baseline). Never imports MPI.
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from plot_tta import accuracy_axis, load_run, save_figure  # noqa: E402

_BASELINE = {"selection": "random", "aggregator": "fedavg"}


def group_runs(paths: list[Path], by: str) -> dict[str, list[dict]]:
    """Runs keyed by their strategy name (``config[by]["name"]``), in first-seen order.

    Raises
    ------
    ValueError
        A file is not a federated result file or its config has no ``by`` section.
    """
    from hpcbench.results import read_attrs

    groups: dict[str, list[dict]] = {}
    for path in paths:
        run = load_run(path)
        section = read_attrs(path).get("config", {}).get(by)
        if not isinstance(section, dict) or "name" not in section:
            raise ValueError(f"{path}: config has no {by}.name (written by an older hpcbench?)")
        run["seed"] = read_attrs(path)["config"].get("seed")
        groups.setdefault(section["name"], []).append(run)
    return groups


def summarise(groups: dict[str, list[dict]], baseline: str) -> list[dict]:
    """Per strategy: runs, runs reaching the target, mean time-to-accuracy (s) over those, speed-up.

    The speed-up is the baseline's mean time-to-accuracy over this strategy's
    (NaN where either reached the target in no run).
    """
    rows = []
    for name, runs in groups.items():
        reached = [r["tta_s"] for r in runs if r["rta"] > 0]
        rows.append({"name": name, "runs": len(runs), "reached": len(reached),
                     "mean_tta_s": float(np.mean(reached)) if reached else math.nan,
                     "seeds": [r["seed"] for r in runs]})
    base = next((r["mean_tta_s"] for r in rows if r["name"] == baseline), math.nan)
    for row in rows:
        row["speedup"] = base / row["mean_tta_s"] if row["mean_tta_s"] > 0 else math.nan
    return rows


def plot(groups: dict[str, list[dict]], out: Path, title: str) -> None:
    """Accuracy against virtual hours, one colour per strategy and one line per run."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7.5, 4.5), constrained_layout=True)
    target = math.nan
    for i, (name, runs) in enumerate(groups.items()):
        colour = f"C{i % 10}"
        for j, run in enumerate(runs):
            ax.plot(run["hours"], run["accuracy"], color=colour, linewidth=1, alpha=0.8,
                    label=name if j == 0 else None)
            if run["rta"] > 0:
                ax.plot(run["tta_s"] / 3600.0, run["target"], marker="o", color=colour, markersize=4)
            target = run["target"] if math.isnan(target) else target
    accuracy_axis(ax, None if math.isnan(target) else target)
    ax.set_xlabel("virtual time (hours)")
    ax.legend(loc="lower right", fontsize=8)
    ax.set_title(title)
    save_figure(fig, out)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("files", nargs="+", type=Path, help="hpcbench fl result files (.h5)")
    parser.add_argument("--by", choices=sorted(_BASELINE), default="selection", help="strategy to group by")
    parser.add_argument("--baseline", default=None, help="strategy the speed-ups are relative to "
                                                         "(default: random / fedavg)")
    parser.add_argument("-o", "--output", type=Path, default=Path("results/fl-compare.png"), help="figure file")
    parser.add_argument("--title", default=None)
    args = parser.parse_args(argv)
    missing = [p for p in args.files if not p.is_file()]
    if missing:
        print(f"fl_compare: error: {missing[0]}: no such file", file=sys.stderr)
        return 2
    try:
        groups = group_runs(args.files, args.by)
    except (OSError, KeyError, ValueError) as exc:
        print(f"fl_compare: error: {exc}", file=sys.stderr)
        return 2
    baseline = args.baseline or _BASELINE[args.by]
    print(f"{args.by:<12} runs  reached  mean time-to-accuracy  speed-up vs {baseline}")
    for row in summarise(groups, baseline):
        tta = f"{row['mean_tta_s'] / 3600:.3f} h ({row['mean_tta_s']:.0f} s)" if row["reached"] else "not reached"
        print(f"{row['name']:<12} {row['runs']:>4}  {row['reached']:>7}  {tta:>21}  {row['speedup']:.2f}x")
    plot(groups, args.output, args.title or f"Time-to-accuracy by {args.by}")
    print(f"figure: {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

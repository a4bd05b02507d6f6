"""Compare federated strategies across seeds: time-to-accuracy per selector, server optimizer or FedBuff.

Usage::

    python analysis/fl_compare.py results/fl/select-*.h5 --by selection -o results/fl/selection.png
    python analysis/fl_compare.py results/fl/opt-*.h5 results/fl/fedbuff-*.h5 --by aggregator \\
        -o results/fl/aggregators.png

Groups hpcbench federated result files by the strategy named in their config
(``selection.name`` or ``aggregator.name``; an asynchronous run, ``mode:
async``, is FedBuff and is grouped as ``fedbuff``, or ``fedbuff+NAME`` when
its server optimizer is not FedAvg). Draws, per strategy, the mean test
accuracy across seeds against virtual hours with the spread (lowest to
highest seed) shaded and the target as a dashed line; prints per strategy each
seed's virtual time to the target, how many runs reached it, the mean over
those, and the baseline's mean divided by it (speed-up; > 1 is faster than
the baseline). Never imports MPI.
"""

from __future__ import annotations

import math
import re
import sys
from pathlib import Path

import numpy as np
from _style import color_for, figure_parser, outputs, pyplot, save_figure
from plot_tta import accuracy_axis, load_run

from hpcbench.runtime.texttable import NA, render

_BASELINE = {"selection": "random", "aggregator": "fedavg", "job": None}


def strategy_name(config: dict, by: str) -> str:
    """The strategy a run belongs to: ``config[by]["name"]``, or FedBuff's name for an asynchronous run.

    With ``by == "job"`` it is the run's ``job_name`` less a trailing
    ``-s<seed>`` (``fedbuff-k3-s2`` -> ``fedbuff-k3``): runs differing in
    settings other than the strategy's name (a tuned learning rate) are told
    apart by the job names given to them.

    With ``by == "aggregator"`` a run with ``mode: async`` is ``fedbuff``
    (FedBuff's buffered sum through FedAvg) or ``fedbuff+NAME`` (through
    server optimizer ``NAME``); grouped by selection, it is ``fedbuff+NAME``
    with ``NAME`` its selector.

    Parameters
    ----------
    config : dict
        A run's config, as stored in its result file.
    by : str
        ``"job"`` or a config section with a ``name`` (``"aggregator"``,
        ``"selection"``).

    Returns
    -------
    str
        The strategy's name.

    Raises
    ------
    ValueError
        The config has no ``by`` section with a ``name`` (with ``by == "job"``:
        no ``job_name``).
    """
    if by == "job":
        if not config.get("job_name"):
            raise ValueError("config has no job_name")
        return re.sub(r"-s[0-9]+$", "", str(config["job_name"]))
    section = config.get(by)
    if not isinstance(section, dict) or "name" not in section:
        raise ValueError(f"config has no {by}.name (written by an older hpcbench?)")
    name = section["name"]
    if config.get("mode") == "async":
        return "fedbuff" if by == "aggregator" and name == "fedavg" else f"fedbuff+{name}"
    return name


def group_runs(paths: list[Path], by: str) -> dict[str, list[dict]]:
    """Runs keyed by :func:`strategy_name`, in first-seen order; each run dict gains ``seed``.

    Raises
    ------
    ValueError
        A file is not a federated result file or its config has no ``by`` section.
    """
    from hpcbench.results import read_attrs

    groups: dict[str, list[dict]] = {}
    for path in paths:
        run = load_run(path)
        config = read_attrs(path).get("config", {})
        try:
            name = strategy_name(config, by)
        except ValueError as exc:
            raise ValueError(f"{path}: {exc}") from None
        run["seed"] = config.get("seed")
        groups.setdefault(name, []).append(run)
    return groups


def summarise(groups: dict[str, list[dict]], baseline: str) -> list[dict]:
    """Per strategy: runs, runs reaching the target, mean time-to-accuracy (s) over those, speed-up.

    The speed-up is the baseline's mean time-to-accuracy over this strategy's
    (NaN where either reached the target in no run). ``tta_per_run`` lists each
    run's ``(seed, virtual seconds to the target)`` (NaN: not reached), in file order.
    """
    rows = []
    for name, runs in groups.items():
        reached = [r["tta_s"] for r in runs if r["rta"] > 0]
        rows.append({"name": name, "runs": len(runs), "reached": len(reached),
                     "mean_tta_s": float(np.mean(reached)) if reached else math.nan,
                     "seeds": [r["seed"] for r in runs],
                     "tta_per_run": [(r["seed"], r["tta_s"] if r["rta"] > 0 else math.nan) for r in runs]})
    base = next((r["mean_tta_s"] for r in rows if r["name"] == baseline), math.nan)
    for row in rows:
        row["speedup"] = base / row["mean_tta_s"] if row["mean_tta_s"] > 0 else math.nan
    return rows


def seed_band(runs: list[dict], points: int = 400) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Mean, lowest and highest test accuracy across runs on a common virtual-time grid.

    Each run's accuracy at time ``t`` is its latest evaluation at or before
    ``t`` (a step function: the model does not change between evaluations as
    far as the file tells); the grid runs from the latest first evaluation to
    the earliest last one, so every run contributes a measured value at every
    point.

    Parameters
    ----------
    runs : list of dict
        :func:`plot_tta.load_run` dicts (``hours``, ``accuracy``: float arrays of equal length,
        ``hours`` ascending).
    points : int
        Grid size.

    Returns
    -------
    hours, mean, low, high : ndarray of shape (points,), float64
        Virtual hours and accuracies (fractions); empty when the runs' evaluated spans do not overlap.
    """
    runs = [r for r in runs if len(r["hours"])]
    if not runs:
        return (np.zeros(0),) * 4
    lo = max(float(r["hours"][0]) for r in runs)
    hi = min(float(r["hours"][-1]) for r in runs)
    if hi < lo:
        return (np.zeros(0),) * 4
    grid = np.linspace(lo, hi, points)
    acc = np.empty((len(runs), points))
    for i, run in enumerate(runs):
        at = np.searchsorted(run["hours"], grid, side="right") - 1
        acc[i] = np.asarray(run["accuracy"])[at]
    return grid, acc.mean(axis=0), acc.min(axis=0), acc.max(axis=0)


def plot(groups: dict[str, list[dict]], out, title: str) -> None:
    """Mean accuracy across seeds against virtual hours per strategy, the seeds' spread shaded.

    Each strategy's mean virtual time to the target (over the seeds reaching
    it) is marked on the target line.
    """
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(7.5, 4.5), constrained_layout=True)
    target = math.nan
    for name, runs in groups.items():
        colour = color_for(name)
        hours, mean, low, high = seed_band(runs)
        ax.plot(hours, mean, color=colour, linewidth=1.5, label=f"{name} ({len(runs)} seeds)")
        if len(runs) > 1:
            ax.fill_between(hours, low, high, color=colour, alpha=0.2, linewidth=0)
        reached = [r["tta_s"] for r in runs if r["rta"] > 0]
        for run in runs:
            target = run["target"] if math.isnan(target) else target
        if reached and not math.isnan(target):
            ax.plot(np.mean(reached) / 3600.0, target, marker="o", color=colour, markersize=5)
    accuracy_axis(ax, None if math.isnan(target) else target)
    ax.set_xlabel("virtual time (hours)")
    ax.legend(loc="lower right", fontsize=8)
    ax.set_title(title)
    save_figure(fig, out)


def main(argv: list[str] | None = None) -> int:
    parser = figure_parser(__doc__, "results/fl-compare.png", "hpcbench fl result files (.h5)")
    parser.add_argument("--by", choices=sorted(_BASELINE), default="selection", help="strategy to group by")
    parser.add_argument("--baseline", default=None, help="strategy the speed-ups are relative to "
                                                         "(default: random / fedavg / the first job)")
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
    baseline = args.baseline or _BASELINE[args.by] or next(iter(groups))
    if args.baseline is not None and baseline not in groups:
        print(f"fl_compare: error: --baseline {baseline!r} is none of the strategies: {', '.join(groups)}",
              file=sys.stderr)
        return 2
    rows = summarise(groups, baseline)
    table = []
    for row in rows:
        unreached = NA(f"target reached in {row['reached']} of {row['runs']} runs")
        seeds = ", ".join(f"{seed}: {t:.0f}" if t == t else f"{seed}: -" for seed, t in row["tta_per_run"])
        table.append((row["name"], row["runs"], row["reached"],
                      row["mean_tta_s"] if row["reached"] else unreached,
                      row["speedup"] if row["speedup"] == row["speedup"] else unreached, seeds))
    for line in render((args.by, "runs", "reached", "mean time-to-accuracy", f"speed-up vs {baseline}",
                        "per seed"), table, units=("", "", "", "(s virtual)", "(x)", "(s virtual)"),
                       formats=("s", "d", "d", ".0f", ".2f", "s")):
        print(line)
    plot(groups, outputs(args), args.title or f"Time-to-accuracy by {args.by}")
    print(f"figure: {', '.join(map(str, outputs(args)))}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

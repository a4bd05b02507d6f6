"""Time to accuracy of training runs: held-out accuracy against modelled time, one line per entry.

Usage::

    python analysis/plot_stellatrain_tta.py results/st-tta-*.h5 --target 0.85 -o results/st-tta.png

Reads hpcbench training result files (tables ``steps`` and ``iterations``:
the digits' held-out accuracy of rank 0's replica after each iteration) and
draws, per entry (``sync`` label), the accuracy against the modelled time
(the steps' ``step_s`` summed, the slowest rank's per step) with the target
as a dashed line; it prints each entry's steps, throughput, final accuracy
and time to the target. ``scripts/stellatrain_tta.py`` runs the comparison.
Never imports MPI.
"""

from __future__ import annotations

import math
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _style import figure_parser, load_all, outputs, pyplot, save_figure  # noqa: E402
from plot_tta import accuracy_axis  # noqa: E402

from hpcbench.results import read_table  # noqa: E402


def accuracy_curves(path) -> dict[str, dict]:
    """Per entry of one training result file: its accuracy after each iteration and the time it was reached.

    Returns
    -------
    dict of str to dict
        ``label -> {time_s, accuracy, steps, samples_per_s}``: ``time_s`` (float64, shape (iterations,))
        the modelled seconds of the entry's steps up to the end of each measured iteration, ``accuracy`` the
        held-out accuracy then, ``steps`` the entry's measured steps, ``samples_per_s`` its samples over
        all workers per modelled second.

    Raises
    ------
    OSError, KeyError
        Not a readable training result file with those tables.
    """
    steps, iters = read_table(path, "steps"), read_table(path, "iterations")
    out = {}
    s_sync, i_sync = np.asarray(steps["sync"]).astype(str), np.asarray(iters["sync"]).astype(str)
    for label in dict.fromkeys(s_sync.tolist()):
        m = (s_sync == label) & ~np.asarray(steps["warmup"]).astype(bool)
        order = np.argsort(steps["step"][m], kind="stable")
        step_s = np.asarray(steps["step_s"])[m][order]
        it = np.asarray(steps["iteration"])[m][order]
        batch = np.asarray(steps["global_batch"])[m][order]
        cum = np.cumsum(step_s)
        k = i_sync == label
        iterations = np.asarray(iters["iteration"])[k]
        ends = np.array([cum[np.flatnonzero(it == i)[-1]] for i in iterations])
        out[label] = dict(time_s=ends, accuracy=np.asarray(iters["accuracy"])[k], steps=int(m.sum()),
                          samples_per_s=float(batch.sum() / step_s.sum()))
    return out


def time_to(curve: dict, target: float) -> float:
    """Modelled seconds until ``curve``'s accuracy first reaches ``target`` (inf: never)."""
    hit = np.flatnonzero(curve["accuracy"] >= target)
    return float(curve["time_s"][hit[0]]) if hit.size else math.inf


def load(path: Path) -> dict:
    return {"path": path, "curves": accuracy_curves(path)}


def main(argv: list[str] | None = None) -> int:
    parser = figure_parser(__doc__, "results/st-tta.png", "hpcbench train result files (.h5)")
    parser.add_argument("--target", type=float, default=0.85)
    args = parser.parse_args(argv)
    try:
        runs = load_all(args.files, load, "plot_stellatrain_tta")
    except SystemExit as exc:
        return int(exc.code)
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(7.5, 4.5), constrained_layout=True)
    print(f"{'entry':<20} {'steps':>5} {'samples/s':>10} {'final acc':>9} {'time to target (s)':>19}")
    for run in runs:
        for label, c in run["curves"].items():
            t = time_to(c, args.target)
            (line,) = ax.plot(c["time_s"], c["accuracy"], marker=".", label=label)
            if math.isfinite(t):
                ax.axvline(t, color=line.get_color(), linestyle=":", linewidth=1)
            print(f"{label:<20} {c['steps']:>5} {c['samples_per_s']:>10.1f} {c['accuracy'][-1]:>9.3f} {t:>19.2f}")
    accuracy_axis(ax, args.target)
    ax.set_xlabel("modelled time (s)")
    ax.legend(loc="lower right", fontsize=8)
    fig.suptitle("Time to accuracy: dense, fixed rates, the StellaTrain controller")
    save_figure(fig, outputs(args), args.files)
    print(f"figure: {', '.join(map(str, outputs(args)))}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

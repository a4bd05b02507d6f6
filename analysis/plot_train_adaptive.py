"""Figure 4 analogue: time-to-accuracy and batch size over time, adaptive batch (gns_batch) against fixed batches.

Usage::

    python analysis/plot_train_adaptive.py results/gns-digits-*.h5 --target 0.95 -o results/fig4-digits.png

Reads hpcbench training result files (kind ``train``) of one task trained
with real data (the digits or the Shakespeare text), e.g. the runs of
``scripts/train_adaptive_gns.sh``, and draws, per file and synchroniser
entry, the held-out accuracy after each measured iteration (left) and the
global batch of every step (right) against the training time: the sum of
the measured steps' ``step_s`` (the slowest rank's step; the accuracy
evaluations are not counted, nor the warm-up steps, which train but whose
time includes the ranks' start-up skew: up to a second on a shared machine). A run with
``step_clock: {kind: modelled}`` (root attribute ``step_clock``; e.g. the
16-worker runs, more ranks than cores) is timed by its ``modelled_step_s``
instead (the compute profiled per batch plus the priced allreduce:
``hpcbench.train.steps.stepclock``); the axes say which clock the files used.
Each file is one line, labelled by its job name. Printed:
each line's final accuracy, the training time at which it first reached
``--target`` (KungFu's time-to-accuracy), and its batch range. Never
imports MPI.
"""

from __future__ import annotations

import sys

import numpy as np
from _style import figure_parser, finish, pyplot
from _train_results import load_runs

from hpcbench.results import read_table


def clock_of(attrs) -> str:
    """``"modelled"`` for a run with a modelled step clock, else ``"measured"``."""
    return "modelled" if str(attrs.get("step_clock", "measured")) == "modelled" else "measured"


def curves(path, clock: str = "measured") -> list[dict]:
    """Per synchroniser entry of ``path``: training time (s) and accuracy at each measured iteration's end, and
    every measured step's time and global batch (warm-up steps are not timed: module docstring); ``clock``
    ``"modelled"`` sums ``modelled_step_s`` instead of ``step_s``."""
    steps, iters = read_table(path, "steps"), read_table(path, "iterations")
    column = "modelled_step_s" if clock == "modelled" else "step_s"
    out = []
    for sync in dict.fromkeys(steps["sync"].astype(str)):
        sel = (steps["sync"].astype(str) == sync) & ~steps["warmup"]
        t = np.cumsum(steps[column][sel])
        it = steps["iteration"][sel]
        isel = iters["sync"].astype(str) == sync
        ends = [int(np.flatnonzero(it == i)[-1]) for i in iters["iteration"][isel]]
        out.append(dict(sync=sync, step_time=t, batch=steps["global_batch"][sel], time=t[ends],
                        accuracy=iters["accuracy"][isel]))
    return out


def time_to(curve: dict, target: float) -> float:
    """Training seconds at the first iteration whose accuracy reached ``target`` (NaN: never)."""
    hit = np.flatnonzero(curve["accuracy"] >= target)
    return float(curve["time"][hit[0]]) if hit.size else float("nan")


def main(argv: list[str] | None = None) -> int:
    """Draw the figure and print the table; returns the exit status."""
    ap = figure_parser(__doc__, "results/train-adaptive.png", "hpcbench train result files (.h5) of one task")
    ap.add_argument("--target", type=float, nargs="+", required=True,
                    help="target held-out accuracies, in (0, 1] (the first is drawn)")
    args = ap.parse_args(argv)
    bad = [t for t in args.target if not 0 < t <= 1]
    if bad:
        print(f"plot_train_adaptive: error: --target {bad[0]}: must be in (0, 1]", file=sys.stderr)
        return 2
    try:
        runs = load_runs(args.files, "plot_train_adaptive")
    except SystemExit as exc:
        return int(exc.code)
    clocks = {clock_of(r["attrs"]) for r in runs}
    if len(clocks) > 1:
        print("plot_train_adaptive: error: the files mix measured and modelled step clocks (one figure, one clock)",
              file=sys.stderr)
        return 2
    clock = clocks.pop()
    plt = pyplot()
    fig, (ax_acc, ax_b) = plt.subplots(1, 2, figsize=(11, 4.2))
    heads = "".join(f"{'to ' + str(t):>10}" for t in args.target)
    print(f"{'run':<34} {'workers':>7} {'batch (global)':>15} {'final acc':>9} {heads}  ({clock} clock)")
    for k, run in enumerate(runs):
        a = run["attrs"]
        for c in curves(run["path"], clock):
            name = str(a.get("job_name")) + (f" [{c['sync']}]" if len(run["summary"]["sync"]) > 1 else "")
            ttas = [time_to(c, t) for t in args.target]
            ax_acc.plot(c["time"], c["accuracy"], color=f"C{k}", label=name)
            ax_b.step(c["step_time"], c["batch"], where="post", color=f"C{k}", label=name)
            if ttas[0] == ttas[0]:
                ax_acc.axvline(ttas[0], color=f"C{k}", ls=":", lw=0.8)
            lo, hi = int(c["batch"].min()), int(c["batch"].max())
            final = float(c["accuracy"][-1]) if len(c["accuracy"]) else float("nan")
            cells = "".join(f"{'never' if t != t else f'{t:.3f} s':>10}" for t in ttas)
            print(f"{name:<34} {int(a.get('workers', 0)):>7} {f'{lo}-{hi}' if lo != hi else str(lo):>15} "
                  f"{final:>9.3f} {cells}")
    ax_acc.axhline(args.target[0], color="grey", ls="--", lw=0.8)
    what = "modelled: profiled compute + priced allreduce" if clock == "modelled" else "measured"
    ax_acc.set_xlabel(f"training time (s, sum of step times, {what})")
    ax_acc.set_ylabel("held-out accuracy")
    ax_acc.legend(fontsize=8)
    ax_b.set_xlabel(f"training time (s, {clock})")
    ax_b.set_ylabel("global batch (samples per step)")
    ax_b.set_yscale("log", base=2)
    model = runs[0]["attrs"].get("model")
    workers = int(runs[0]["attrs"].get("workers", 0))
    fig.suptitle(f"{model}, {workers} workers: adaptive batch (gns_batch) against fixed batches (KungFu figure 4)")
    return finish(fig, args)


if __name__ == "__main__":
    sys.exit(main())

"""Figure 8 analogue: throughput with each online monitor against none, from interleaved runs.

Usage::

    python analysis/plot_train_monitors.py results/train-fig8.h5 -o results/train-fig8.png

Reads hpcbench training result files (kind ``train``) run with
``interleave_monitors: true`` (iterations cycling through no monitor and each
monitor alone on the same model, KungFu's figure 8 measurement, Mai et al.,
OSDI'20) and draws one group of bars per file and synchroniser: images/s per
worker of each variant with its 95 % interval, labelled with the overhead
against ``none`` in percent and, below it, the monitor's own time per step
as a share of the step without it (``summary.monitor_cost``, timed in the
monitor: free of the iterations' noise; absent from files written before
it existed). Never imports MPI.
"""

from __future__ import annotations

import sys

from _style import finish, pyplot
from _train_results import figure_arguments, load_runs, summary_rows


def main(argv: list[str] | None = None) -> int:
    """Draw the figure and print the table; returns the exit status."""
    plt = pyplot()
    args = figure_arguments(argv, __doc__, "results/train-fig8.png")
    try:
        rows = summary_rows(load_runs(args.files, "plot_train_monitors"))
    except SystemExit as exc:
        return int(exc.code)
    groups: dict = {}
    for r in rows:
        groups.setdefault((r["path"], r["model"], r["sync"], r["workers"]), []).append(r)
    groups = {k: v for k, v in groups.items() if len(v) > 1 and any(r["variant"] == "none" for r in v)}
    if not groups:
        print("plot_train_monitors: error: no interleaved monitor run (variants 'none' and a monitor) in the "
              "files", file=sys.stderr)
        return 2
    fig, ax = plt.subplots(figsize=(max(5.0, 2.2 * len(groups) + 2), 4.4))
    x, ticks, labels = 0.0, [], []
    print(f"{'model':<13} {'sync':<12} {'workers':>7} {'variant':<10} {'img/s/worker':>12} {'+-':>6} {'overhead':>9} "
          f"{'timed':>7}")
    for (path, model, sync, p), vs in groups.items():
        vs.sort(key=lambda r: (r["variant"] != "none", r["variant"]))
        for j, r in enumerate(vs):
            over = 0.0 if r["variant"] == "none" else 100 * r["monitor_overhead"]
            timed = 0.0 if r["variant"] == "none" else 100 * r.get("monitor_cost", float("nan"))
            ax.bar(x + j, r["img_per_s_worker"], yerr=r["img_per_s_worker_ci"], color=f"C{j}", capsize=3,
                   label=r["variant"] if not ticks else None)
            if r["variant"] != "none":
                label = f"{over:+.1f}%" + (f"\n(timed {timed:+.1f}%)" if timed == timed else "")
                ax.text(x + j, r["img_per_s_worker"], label, ha="center", va="bottom", fontsize=8,
                        bbox=dict(facecolor="white", edgecolor="none", alpha=0.8, pad=1))
            print(f"{model:<13} {sync:<12} {p:>7} {r['variant']:<10} {r['img_per_s_worker']:>12.1f} "
                  f"{r['img_per_s_worker_ci']:>6.1f} {over:>+8.1f}% {timed:>+6.1f}%")
        ticks.append(x + (len(vs) - 1) / 2)
        labels.append(f"{model}\n{sync}, {p} workers")
        x += len(vs) + 1
    ax.set_xticks(ticks, labels, fontsize=8)
    ax.set_ylabel("images/s per worker")
    ax.set_title("online monitors at interval 1 against none (interleaved; label: throughput overhead, "
                 "time in the monitor)", fontsize=9)
    ax.legend(fontsize=8)
    return finish(fig, args)


if __name__ == "__main__":
    sys.exit(main())

"""Figure 9 analogue: data-parallel throughput against ideal, per synchroniser and worker count.

Usage::

    python analysis/plot_train_scaling.py results/train-fig9/*.h5 -o results/train-fig9.png

Reads hpcbench training result files (kind ``train``), groups them by model
and link (one panel each) and draws, against the number of workers, the
total throughput of every synchroniser (solid; one line per bucket schedule,
``ring`` FIFO and ``ring, priority``), its alpha-beta prediction
(dotted, where the link is modelled) and the ideal, ``workers x`` one
worker's throughput without communication (dashed grey), as KungFu's figure 9
(Mai et al., OSDI'20). Prints one row per point: efficiency (measured over
ideal) beside the predicted one. Never imports MPI.
"""

from __future__ import annotations

import math
import sys
from collections import defaultdict

from _style import color_for, finish, pyplot
from _train_results import figure_arguments, load_runs, summary_rows

from hpcbench.runtime.texttable import render


def main(argv: list[str] | None = None) -> int:
    """Draw the figure and print the table; returns the exit status."""
    plt = pyplot()
    args = figure_arguments(argv, __doc__, "results/train-fig9.png")
    try:
        rows = [r for r in summary_rows(load_runs(args.files, "plot_train_scaling")) if r["variant"] == "none"]
    except SystemExit as exc:
        return int(exc.code)
    if not rows:
        print("plot_train_scaling: error: no completed synchroniser run in the files", file=sys.stderr)
        return 2
    panels = defaultdict(lambda: defaultdict(dict))
    for r in rows:
        panels[(r["model"], r["link"])][r["line"]][r["workers"]] = r
    table = [(model, link, p, name, r["img_per_s_total"], r["ideal_img_per_s_total"], r["efficiency"],
              r["predicted_efficiency"])
             for (model, link), syncs in sorted(panels.items()) for name, by_p in sorted(syncs.items())
             for p, r in sorted(by_p.items())]
    for line in render(("model", "link", "workers", "sync", "img/s", "ideal", "eff", "pred"), table,
                       formats=("s", "s", "d", "s", ".1f", ".1f", ".3f", ".3f")):
        print(line)
    n = len(panels)
    fig, axes = plt.subplots(1, n, figsize=(5.2 * n, 4.4), squeeze=False)
    for ax, ((model, link), syncs) in zip(axes[0], sorted(panels.items())):
        ideal = {}
        for name, by_p in sorted(syncs.items()):
            ps = sorted(by_p)
            (h,) = ax.plot(ps, [by_p[p]["img_per_s_total"] for p in ps], "o-", label=name, color=color_for(name))
            pred = [by_p[p]["predicted_efficiency"] * by_p[p]["ideal_img_per_s_total"] for p in ps]
            if any(math.isfinite(v) for v in pred):
                ax.plot(ps, pred, ":", color=h.get_color())
            for p in ps:
                ideal.setdefault(p, by_p[p]["ideal_img_per_s_total"])
        ps = sorted(ideal)
        ax.plot(ps, [ideal[p] for p in ps], "--", color="grey", label="ideal")
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel("workers")
        ax.set_ylabel("images/s (total)")
        ax.set_title(f"{model}\n{link}", fontsize=9)
        ax.legend(fontsize=7)
    fig.suptitle("throughput against ideal (dotted: alpha-beta prediction)", fontsize=10)
    return finish(fig, args)


if __name__ == "__main__":
    sys.exit(main())

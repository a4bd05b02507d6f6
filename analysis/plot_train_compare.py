"""Synchronisers side by side: images/s per worker of each synchroniser in each training run.

Usage::

    python analysis/plot_train_compare.py results/train-targets.h5 -o results/train-compare.png

Reads hpcbench training result files (kind ``train``) and draws, per file,
one bar per synchroniser (images/s per worker, mean over iterations, with
KungFu's 1.96 std interval), labelled with its ratio to the file's first
synchroniser: hpcbench's ring against DDP and Horovod at the same world size
(KungFu, Mai et al. OSDI'20, against Horovod; ``jobs/configs/train-targets.yaml``).
A synchroniser that was skipped (Horovod not built) is listed with its
reason. Prints one row per bar. Never imports MPI.
"""

from __future__ import annotations

import sys

from _style import color_for, finish, pyplot
from _train_results import figure_arguments, load_runs

from hpcbench.runtime.texttable import NA, render


def main(argv: list[str] | None = None) -> int:
    """Draw the figure and print the table; returns the exit status."""
    args = figure_arguments(argv, __doc__, "results/train-compare.png")
    try:
        runs = load_runs(args.files, "plot_train_compare")
    except SystemExit as exc:
        return int(exc.code)
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(max(5.0, 1.4 * sum(len(r["summary"]["sync"]) for r in runs) + 2), 4.4))
    table, x, ticks, labels = [], 0, [], []
    for run in runs:
        s = run["summary"]
        first = None
        for i in range(len(s["sync"])):
            name, variant, status = str(s["sync"][i]), str(s["variant"][i]), str(s["status"][i])
            if variant != "none":
                continue
            if not status.startswith("ok"):
                table.append((run["path"].name, name, NA(status), NA(status), NA(status), NA(status)))
                continue
            img, ci = float(s["img_per_s_worker"][i]), float(s["img_per_s_worker_ci"][i])
            first = img if first is None else first
            ax.bar(x, img, yerr=ci, capsize=3, color=color_for(name.partition(":")[0]),
                   hatch="//" if ":" in name else None)
            ax.text(x, img, f"{img / first:.2f}x", ha="center", va="bottom", fontsize=8)
            ticks.append(x)
            labels.append(f"{name}\n{run['path'].stem}" if len(runs) > 1 else name)
            table.append((run["path"].name, name, img, ci, float(s["efficiency"][i]), img / first))
            x += 1
        x += 1
    print("\n".join(render(("file", "sync", "img/s/worker", "+-", "efficiency", "x first"), table,
                           units=("", "", "(1/s)", "(1/s)", "", ""),
                           formats=("s", "s", ".1f", ".1f", ".3f", ".3f"))))
    ax.set_xticks(ticks, labels, fontsize=8)
    ax.set_ylabel("images/s per worker")
    ax.set_title("synchronisers side by side (label: ratio to the first)")
    return finish(fig, args)


if __name__ == "__main__":
    sys.exit(main())

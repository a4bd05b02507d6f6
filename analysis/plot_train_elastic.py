"""KungFu's figures 6/7 analogue: active workers and throughput over time of elastic training runs.

Usage::

    python analysis/plot_train_elastic.py results/train-adaptive-elastic-*.h5 -o results/elastic.png

Reads hpcbench training result files (kind ``train``; the ``steps`` table's
``workers``, ``step_s`` and ``samples_per_s_total``, and the ``resizes``
table), draws per file the worker count (step line) and the total throughput
(samples/s, each step) against the run's elapsed time (the steps' times
added up), marks each resize, and prints the resize table (kind, phases in
ms, bytes) and the policies' reasons for each worker count (the
``decisions`` table: the ``provisioning`` policy's measured ``T(N)``, KungFu's
figure 6). Never imports MPI.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
from _style import finish, pyplot
from _train_results import figure_arguments, load_runs

from hpcbench.results import read_table

PHASES = ("decision_ms", "agreement_ms", "notify_ms", "process_start_ms", "communicator_ms", "state_ms",
          "rebuild_ms")


def load_elastic(path: Path) -> dict:
    """Per step: elapsed time (s, end of the step), workers, samples/s; and the resizes rows."""
    steps = read_table(path, "steps")
    return {"label": path.stem, "time_s": np.cumsum(steps["step_s"]), "workers": steps["workers"],
            "throughput": steps["samples_per_s_total"], "step": steps["step"], "resizes": read_table(path, "resizes"),
            "decisions": read_table(path, "decisions")}


def decision_lines(run: dict) -> list[str]:
    """One line per worker-count decision: the step it took effect before, the count, the policy's reason."""
    d = run["decisions"]
    return [f"{run['label']}: {int(d['workers'][i])} workers before step {int(d['step'][i])} "
            f"({_text(d['reason'][i])})" for i in range(len(d["step"])) if d["workers"][i] > 0]


def _text(v) -> str:
    return v.decode() if isinstance(v, bytes) else str(v)


def resize_lines(run: dict) -> list[str]:
    """One line per resize: old -> new, kind, mode, phases and total in ms, first step, MB moved."""
    r = run["resizes"]
    kinds, modes = r["kind"].astype(str), r["mode"].astype(str)
    out = []
    for i in range(len(r["step"])):
        phases = ", ".join(f"{k[:-3]} {float(r[k][i]):.1f}" for k in PHASES)
        out.append(f"{run['label']}: {int(r['old'][i])}->{int(r['new'][i])} {kinds[i]} ({modes[i]}) "
                   f"before step {int(r['step'][i])}: {float(r['resize_ms'][i]):.1f} ms ({phases}); first step "
                   f"{float(r['first_step_ms'][i]):.1f} ms; {int(r['bytes_moved'][i]) / 1e6:.2f} MB")
    return out


def plot(runs: list[dict]):
    """Workers (top) and samples/s (bottom) against elapsed time, resizes as dotted lines; the figure."""
    fig, (ax_w, ax_t) = pyplot().subplots(2, 1, figsize=(8, 5.5), sharex=True)
    for run in runs:
        (line,) = ax_w.step(run["time_s"], run["workers"], where="post", label=run["label"])
        ax_t.plot(run["time_s"], run["throughput"], ".", markersize=3, color=line.get_color())
        idx = np.searchsorted(run["step"], run["resizes"]["step"])
        for t in run["time_s"][np.clip(idx - 1, 0, len(run["time_s"]) - 1)]:
            ax_t.axvline(t, color=line.get_color(), linestyle=":", linewidth=1)
    ax_w.set_ylabel("active workers")
    ax_t.set_ylabel("samples/s (all workers)")
    ax_t.set_xlabel("training time (s, sum of step times)")
    ax_w.legend(fontsize=8)
    for ax in (ax_w, ax_t):
        ax.grid(alpha=0.3)
    fig.suptitle("Elastic training: worker count and throughput (KungFu figures 6/7)")
    return fig


def main(argv=None) -> int:
    args = figure_arguments(argv, __doc__, "results/elastic.png")
    runs = [load_elastic(r["path"]) for r in load_runs(args.files, "plot_train_elastic")]
    for run in runs:
        for line in decision_lines(run) + resize_lines(run):
            print(line)
    return finish(plot(runs), args)


if __name__ == "__main__":
    sys.exit(main())

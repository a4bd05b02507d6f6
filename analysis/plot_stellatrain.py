"""StellaTrain's controller over time: true and estimated bandwidth, compression ratio, per-worker batch, throughput.

Usage::

    python analysis/plot_stellatrain.py results/train-stellatrain.h5 -o results/train-stellatrain.png

Reads one hpcbench training result file run with the ``stellatrain``
policy (tables ``telemetry``, ``controller``, ``steps``) and draws four
timelines against the step, one entry (``--sync``; default the first with
controller decisions):

1. the modelled link's true mean bandwidth over each step (``link_bps``)
   and the controller's measured and estimated bandwidth at each decision;
2. the fraction of gradient elements kept (as applied, rank 0);
3. every worker's batch size;
4. the throughput, samples/s over all workers.

It prints the bandwidth estimate's error against the truth at each
decision after ``--after`` steps: ``estimate / true - 1``, where ``true``
is the link's mean over the ``--window`` steps up to the decision (the
steps whose telemetry the estimate saw last), and its median. Never imports MPI.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
from _style import outputs, save_figure

from hpcbench.results import read_table


def estimate_errors(tel: dict, ctl: dict, after: int, window: int) -> tuple[np.ndarray, np.ndarray]:
    """``(decision steps, estimate / true - 1)`` for the running decisions taken after step ``after``.

    Parameters
    ----------
    tel : dict of arrays
        Rank 0's rows of the ``telemetry`` table of one entry (``step``, ``link_bps``).
    ctl : dict of arrays
        That entry's ``controller`` rows (``step``, ``estimate_bps``).
    """
    steps, link = tel["step"], tel["link_bps"]
    out_s, out_e = [], []
    for s, est in zip(ctl["step"], ctl["estimate_bps"]):
        if s < after or not np.isfinite(est):
            continue
        rows = (steps > s - window) & (steps <= s)
        true = float(np.mean(link[rows])) if rows.any() else np.nan
        out_s.append(int(s))
        out_e.append(est / true - 1.0)
    return np.asarray(out_s), np.asarray(out_e)


def _rows(table: dict, mask) -> dict:
    return {k: np.asarray(v)[mask] for k, v in table.items()}


def main(argv: list[str] | None = None) -> int:
    """Draw the figure and print the estimate's errors; returns the exit status."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("file", type=Path, help="hpcbench train result file (.h5) of a stellatrain run")
    ap.add_argument("-o", "--output", type=Path, action="append", default=None,
                    help="figure file; repeat for more formats (-o fig.png -o fig.pdf)")
    ap.set_defaults(default_output=Path("results/train-stellatrain.png"))
    ap.add_argument("--sync", default=None, help="the entry (label) to draw")
    ap.add_argument("--after", type=int, default=20, help="decisions from this step on count in the median")
    ap.add_argument("--window", type=int, default=5, help="steps the true bandwidth is averaged over")
    args = ap.parse_args(argv)
    try:
        tel, ctl, steps = (read_table(args.file, t) for t in ("telemetry", "controller", "steps"))
    except (OSError, KeyError, ValueError) as exc:
        print(f"plot_stellatrain: error: {args.file}: {exc} (a run with the stellatrain policy has tables "
              f"telemetry, controller and steps)", file=sys.stderr)
        return 2
    labels = [str(s) for s in np.asarray(ctl["sync"]).astype(str)]
    label = args.sync or (labels[0] if labels else None)
    if label is None or label not in labels:
        print(f"plot_stellatrain: error: no controller decision for entry {label!r} in {args.file}", file=sys.stderr)
        return 2
    tel = _rows(tel, np.asarray(tel["sync"]).astype(str) == label)
    ctl = _rows(ctl, np.asarray(ctl["sync"]).astype(str) == label)
    steps = _rows(steps, np.asarray(steps["sync"]).astype(str) == label)
    ranks = sorted(set(tel["rank"].tolist()))
    r0 = _rows(tel, tel["rank"] == ranks[0])
    fig, ax = plt.subplots(4, 1, figsize=(8, 10), sharex=True)
    ax[0].plot(r0["step"], r0["link_bps"] / 1e6, "k-", lw=1, label="true (link's mean over the step)")
    run = ctl["phase"].astype(str) == "running"
    ax[0].plot(ctl["step"][run], ctl["estimate_bps"][run] / 1e6, "C1o-", ms=3, label="estimate")
    ax[0].plot(ctl["step"][run], ctl["measured_bps"][run] / 1e6, "C2x", ms=4, label="measured (min receive)")
    ax[0].set_ylabel("bandwidth (Mbit/s)")
    ax[0].legend(fontsize=8)
    ax[1].semilogy(r0["step"], r0["ratio"], "C3-")
    ax[1].set_ylabel("fraction kept")
    for r in ranks:
        rr = _rows(tel, tel["rank"] == r)
        ax[2].step(rr["step"], rr["micro_batch"], where="post", label=f"rank {r}")
    ax[2].set_ylabel("batch per worker")
    ax[2].legend(fontsize=8, ncol=min(4, len(ranks)))
    ax[3].plot(steps["step"], steps["samples_per_s_total"], "C0-")
    ax[3].set_ylabel("samples/s (all workers)")
    ax[3].set_xlabel("step")
    fig.suptitle(f"{args.file.name}: {label}, {len(ranks)} workers")
    fig.tight_layout()
    save_figure(fig, outputs(args), [args.file])
    s, err = estimate_errors(r0, ctl, args.after, args.window)
    print(f"{'step':>6} {'estimate/true - 1':>18}")
    for a, e in zip(s, err):
        print(f"{a:>6} {e:>+18.3f}")
    if err.size:
        print(f"median |estimate / true - 1| after step {args.after}: {np.median(np.abs(err)):.3f} "
              f"({err.size} decisions); median signed {np.median(err):+.3f}")
    ok = steps["warmup"] == 0
    print(f"throughput: {steps['global_batch'][ok].sum() / steps['step_s'][ok].sum():.1f} samples/s over "
          f"{ok.sum()} measured steps")
    print(f"wrote {', '.join(map(str, outputs(args)))}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

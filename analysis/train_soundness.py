"""Is emulated compute sound? Throughput of emulated (dilated and not) against real runs, and
measured communication against the alpha-beta model; exit status 1 when a bar is missed.

Usage::

    python analysis/train_soundness.py REAL.h5 EMULATED.h5 [DILATED.h5 ...] -o soundness.png

The first file is the reference (normally ``compute: real``). Two bars, as
the soundness check of docs/train.md states them:

- throughput: every other file with the reference's ``overlap`` setting, per
  synchroniser, against the reference: within ``--throughput-tol`` (5 %);
- communication: every file with ``overlap: false`` and a modelled link,
  per synchroniser, the mean communication span per step against the
  alpha-beta time of its reductions one after the other
  (``predicted_comm_s``): within ``--comm-tol`` (15 %).

Prints one row per file and synchroniser with each ratio and whether it is
within its bar, draws both ratios with their bands, and exits 1 when any
is outside (0 when all hold, 2 on bad input). Never imports MPI.
"""

from __future__ import annotations

import math
import sys

from _style import color_for, figure_parser, outputs, pyplot, save_figure
from _train_results import load_runs, summary_rows

from hpcbench.runtime.texttable import NA, render


def checks(runs: list[dict], throughput_tol: float, comm_tol: float) -> list[dict]:
    """One row per file and synchroniser: the two ratios and whether each bar holds (None: not checked)."""
    per_file = [{r["sync"]: r for r in summary_rows([run]) if r["variant"] == "none"} for run in runs]
    ref, ref_overlap = per_file[0], runs[0]["attrs"].get("overlap")
    out = []
    for i, (run, rows) in enumerate(zip(runs, per_file)):
        a = run["attrs"]
        for name, r in rows.items():
            base = ref.get(name)
            ratio = r["img_per_s_worker"] / base["img_per_s_worker"] if base else math.nan
            comm, pred = r["comm_span_s"], r["predicted_comm_s"]
            comm_ratio = comm / pred if pred == pred and pred > 0 else math.nan
            tp_ok = (bool(abs(ratio - 1) <= throughput_tol) if i > 0 and a.get("overlap") == ref_overlap and base
                     else None)
            comm_ok = (bool(abs(comm_ratio - 1) <= comm_tol) if not a.get("overlap") and comm_ratio == comm_ratio
                       else None)
            out.append({"file": run["path"].name, "compute": r["compute"], "dilation": r["dilation"],
                        "overlap": a.get("overlap"), "sync": name, "img": r["img_per_s_worker"], "ratio": ratio,
                        "comm_ms": 1e3 * comm, "pred_ms": 1e3 * pred, "comm_ratio": comm_ratio,
                        "throughput_ok": tp_ok, "comm_ok": comm_ok})
    return out


def _verdict(ok) -> str | NA:
    return NA("not checked") if ok is None else ("within" if ok else "OUTSIDE")


def main(argv: list[str] | None = None) -> int:
    """Print the checks, draw them; returns 0 when every bar holds, 1 when one is missed, 2 on bad input."""
    ap = figure_parser(__doc__, "results/train-soundness.png", "hpcbench train result files, the reference first")
    ap.add_argument("--throughput-tol", type=float, default=0.05, help="throughput bar (default 0.05: 5 %%)")
    ap.add_argument("--comm-tol", type=float, default=0.15, help="communication bar (default 0.15: 15 %%)")
    args = ap.parse_args(argv)
    try:
        runs = load_runs(args.files, "train_soundness")
    except SystemExit as exc:
        return int(exc.code)
    rows = checks(runs, args.throughput_tol, args.comm_tol)
    table = [(r["file"], r["compute"], r["dilation"], str(r["overlap"]).lower(), r["sync"], r["img"],
              r["ratio"] if r["ratio"] == r["ratio"] else NA("no reference row"), _verdict(r["throughput_ok"]),
              r["comm_ms"], r["pred_ms"] if r["pred_ms"] == r["pred_ms"] else NA("no link model"),
              r["comm_ratio"] if r["comm_ratio"] == r["comm_ratio"] else NA("no link model"),
              _verdict(r["comm_ok"])) for r in rows]
    for line in render(("file", "compute", "dil", "overlap", "sync", "img/s/worker", "/ref",
                        f"within {100 * args.throughput_tol:g} %", "comm", "a-b", "meas/a-b",
                        f"within {100 * args.comm_tol:g} %"), table,
                       units=("", "", "", "", "", "(1/s)", "(x)", "", "(ms)", "(ms)", "(x)", ""),
                       formats=("s", "s", "g", "s", "s", ".2f", ".3f", "s", ".1f", ".1f", ".3f", "s")):
        print(line)
    plt = pyplot()
    fig, (ax_t, ax_c) = plt.subplots(1, 2, figsize=(12, 4.4))
    for ax, key, ok_key, tol, title in ((ax_t, "ratio", "throughput_ok", args.throughput_tol,
                                         "throughput / reference (same overlap)"),
                                        (ax_c, "comm_ratio", "comm_ok", args.comm_tol,
                                         "communication / alpha-beta (overlap off)")):
        shown = [r for r in rows if r[ok_key] is not None]
        ax.axhspan(1 - tol, 1 + tol, color="0.9", label=f"within {100 * tol:g} %")
        ax.axhline(1.0, color="black", linewidth=0.8)
        for i, r in enumerate(shown):
            ax.bar(i, r[key], color=color_for(r["sync"]), edgecolor="black" if r[ok_key] else "red",
                   linewidth=0.6 if r[ok_key] else 2.0)
        ax.set_xticks(range(len(shown)), [f"{r['file']}\n{r['sync']}" for r in shown], rotation=30, ha="right",
                      fontsize=7)
        ax.set_ylim(min([0.8] + [r[key] - 0.05 for r in shown]), max([1.2] + [r[key] + 0.05 for r in shown]))
        ax.set_title(title)
        ax.legend(loc="upper right")
    fig.suptitle("Soundness of emulated compute (red edge: outside the bar)")
    fig.tight_layout()
    save_figure(fig, outputs(args), args.files)
    missed = [r for r in rows if r["throughput_ok"] is False or r["comm_ok"] is False]
    checked = sum((r["throughput_ok"] is not None) + (r["comm_ok"] is not None) for r in rows)
    outside = sum((r["throughput_ok"] is False) + (r["comm_ok"] is False) for r in rows)
    print(f"{checked - outside} of {checked} checks within their bars"
          + (f"; outside: {', '.join(r['file'] + ' ' + r['sync'] for r in missed)}" if missed else ""))
    print(f"wrote {', '.join(map(str, outputs(args)))}")
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())

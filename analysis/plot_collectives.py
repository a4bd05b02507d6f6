"""Collectives figure: bus bandwidth and latency against MPI per implementation, and overlap.

Usage::

    python analysis/plot_collectives.py results/collectives-*.h5 -o results/collectives.png

Reads hpcbench collectives result files (kind ``collectives``): their
``results`` table (one row per message size and implementation, nccl-tests'
``busbw``; KungFu's and Horovod's allreduce against MPI's own) and, from
``--overlap`` runs, their ``overlap`` table. Draws up to three panels:

1. busbw (GB/s, from the mean time) against the message size, one line per
   implementation (and file, when several);
2. median time (p50) over MPI's p50 at the same size: below 1 is faster than
   MPI (the small-message panel of the latency comparison);
3. with overlap files: the share of communication hidden behind compute,
   per transport (shared memory, modelled link).

Prints one row per size and implementation with the ratios to MPI. Never
imports MPI.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
from _style import bytes_axis, color_for, figure_parser, finish, load_all, plain_log, pyplot

from hpcbench.results import read_attrs, read_table
from hpcbench.runtime.texttable import NA, render


def load_run(path: Path) -> dict:
    """Attributes and tables of one collectives file.

    Raises
    ------
    ValueError
        Not a collectives file, or one with neither a ``results`` nor an ``overlap`` table.
    """
    import h5py

    attrs = read_attrs(path)
    if attrs.get("kind") != "collectives":
        raise ValueError(f"{path}: kind {attrs.get('kind')!r}, expected 'collectives'")
    with h5py.File(path, "r") as h5:
        tables = {name: read_table(h5, name) for name in ("results", "overlap") if name in h5}
    if not tables:
        raise ValueError(f"{path}: no results or overlap table")
    return {"path": path, "attrs": attrs, **tables}


def rows(runs: list[dict]) -> list[dict]:
    """One dict per (file, size, implementation) with p50, busbw and the ratios to MPI's row."""
    out = []
    for run in runs:
        r = run.get("results")
        if r is None:
            continue
        impl = np.asarray(r["impl"]).astype(str)
        op = str(run["attrs"].get("config", {}).get("op", ""))
        for i in range(len(impl)):
            mpi = np.flatnonzero((impl == "mpi") & (r["size"] == r["size"][i]))
            m = mpi[0] if len(mpi) else None
            out.append({"file": run["path"].stem, "op": op, "size": int(r["size"][i]), "impl": impl[i],
                        "p50": float(r["p50"][i]), "busbw": float(r["busbw"][i]),
                        "p50_vs_mpi": float(r["p50"][i] / r["p50"][m]) if m is not None else np.nan,
                        "busbw_vs_mpi": float(r["busbw"][i] / r["busbw"][m]) if m is not None and r["busbw"][m] > 0
                        else np.nan, "wrong": int(r["wrong"][i])})
    return out


def _size_label(nbytes: int) -> str:
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if nbytes >= scale and nbytes % scale == 0:
            return f"{nbytes // scale} {unit}"
    return f"{nbytes} B"


def main(argv: list[str] | None = None) -> int:
    """Draw the figure and print the table; returns the exit status."""
    args = figure_parser(__doc__, "results/collectives.png", "hpcbench collectives result files (.h5)"
                         ).parse_args(argv)
    try:
        runs = load_all(args.files, load_run, "plot_collectives")
    except SystemExit as exc:
        return int(exc.code)
    table = rows(runs)
    no_mpi = NA("no MPI row")
    print("\n".join(render(
        ("file", "op", "size", "impl", "p50", "busbw", "p50 / MPI", "busbw / MPI", "#wrong"),
        [(t["file"], t["op"], _size_label(t["size"]), t["impl"], t["p50"], t["busbw"],
          t["p50_vs_mpi"] if t["p50_vs_mpi"] == t["p50_vs_mpi"] else no_mpi,
          t["busbw_vs_mpi"] if t["busbw_vs_mpi"] == t["busbw_vs_mpi"] else no_mpi, t["wrong"]) for t in table],
        units=("", "", "", "", "(us)", "(GB/s)", "(x)", "(x)", ""),
        formats=("s", "s", "s", "s", ".1f", ".3f", ".2f", ".2f", "d"))))
    overlap = [run for run in runs if "overlap" in run]
    panels = (2 if table else 0) + (1 if overlap else 0)
    plt = pyplot()
    fig, axes = plt.subplots(1, panels, figsize=(5.4 * panels, 4.2), squeeze=False)
    axes = list(axes[0])
    several = len({t["file"] for t in table}) > 1
    if table:
        ax_bw, ax_lat = axes[0], axes[1]
        for key in dict.fromkeys((t["file"], t["impl"]) for t in table):
            pts = sorted((t for t in table if (t["file"], t["impl"]) == key), key=lambda t: t["size"])
            label = f"{key[1]} ({key[0]})" if several else key[1]
            x = [t["size"] for t in pts]
            ax_bw.plot(x, [t["busbw"] for t in pts], "o-", color=color_for(key[1]), label=label, markersize=3)
            if key[1] != "mpi":
                ax_lat.plot(x, [t["p50_vs_mpi"] for t in pts], "o-", color=color_for(key[1]), label=label,
                            markersize=3)
        bytes_axis(ax_bw)
        ax_bw.set_yscale("log")
        plain_log(ax_bw, "y")
        ax_bw.set_xlabel("message size (B)")
        ax_bw.set_ylabel("busbw (GB/s)")
        ax_bw.set_title("bus bandwidth (nccl-tests' busbw)")
        ax_bw.legend()
        ax_lat.axhline(1.0, color="black", linewidth=0.8)
        bytes_axis(ax_lat)
        ax_lat.set_yscale("log")
        plain_log(ax_lat, "y")
        ax_lat.set_xlabel("message size (B)")
        ax_lat.set_ylabel("p50 time / MPI's p50")
        ax_lat.set_title("median latency against MPI (< 1: faster)")
        ax_lat.legend()
    if overlap:
        ax = axes[-1]
        for run in overlap:
            ov = run["overlap"]
            transports = np.asarray(ov["transport"]).astype(str)
            for t in dict.fromkeys(transports):
                sel = transports == t
                ax.errorbar(ov["size"][sel], 100 * ov["hidden"][sel],
                            yerr=[100 * (ov["hidden"][sel] - ov["hidden_q1"][sel]),
                                  100 * (ov["hidden_q3"][sel] - ov["hidden"][sel])],
                            fmt="o-", capsize=3, label=f"{t} ({run['path'].stem})" if len(overlap) > 1 else t)
        ax.axhline(80, color="grey", linestyle="--", linewidth=0.8, label="80 %")
        bytes_axis(ax)
        ax.set_xlabel("bytes per iallreduce")
        ax.set_ylabel("communication hidden (%)")
        ax.set_title("iallreduce hidden behind compute (median, quartiles)")
        ax.legend()
    return finish(fig, args)


if __name__ == "__main__":
    sys.exit(main())

"""Cost-model figure: allreduce time measured over the link model against the alpha-beta prediction.

Usage::

    python analysis/plot_costmodel.py results/costmodel-*.h5 -o results/costmodel.png

Reads hpcbench cost-model result files (kind ``costmodel``: every algorithm
at every link rate, latency and size, measured over the modelled link and
predicted by its alpha-beta-gamma model, Thakur, Rabenseifner and Gropp
2005). Draws measured against predicted time on log axes (the diagonal is a
perfect model) and the ratio per algorithm against the size. Prints one row
per measurement. Never imports MPI.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
from _style import color_for, figure_parser, finish, load_all, plain_log, pyplot

from hpcbench.results import read_attrs, read_table
from hpcbench.runtime.texttable import render


def load_run(path: Path) -> dict:
    """The ``results`` table of one cost-model file.

    Raises
    ------
    ValueError
        Not a cost-model file.
    """
    attrs = read_attrs(path)
    if attrs.get("kind") != "costmodel":
        raise ValueError(f"{path}: kind {attrs.get('kind')!r}, expected 'costmodel'")
    return {"path": path, "attrs": attrs, "results": read_table(path, "results")}


def main(argv: list[str] | None = None) -> int:
    """Draw the figure and print the table; returns the exit status."""
    args = figure_parser(__doc__, "results/costmodel.png", "hpcbench costmodel result files (.h5)"
                         ).parse_args(argv)
    try:
        runs = load_all(args.files, load_run, "plot_costmodel")
    except SystemExit as exc:
        return int(exc.code)
    r = {k: np.concatenate([run["results"][k] for run in runs]) for k in runs[0]["results"]}
    alg = np.asarray(r["algorithm"]).astype(str)
    print("\n".join(render(
        ("algorithm", "ranks", "link", "alpha", "size", "measured", "predicted", "ratio", "cpu"),
        [(alg[i], int(r["ranks"][i]), r["link"][i] / 1e9, r["alpha"][i], r["size"][i] / 1e6, 1e3 * r["measured"][i],
          1e3 * r["predicted"][i], r["ratio"][i], r["cpu"][i]) for i in range(len(alg))],
        units=("", "", "(Gbit/s)", "(s)", "(MB)", "(ms)", "(ms)", "(x)", "(share)"),
        formats=("s", "d", "g", "g", ".4g", ".3f", ".3f", ".3f", ".2f"))))
    plt = pyplot()
    fig, (ax, ax_r) = plt.subplots(1, 2, figsize=(11, 4.3))
    for name in dict.fromkeys(alg):
        sel = alg == name
        ax.scatter(1e3 * r["predicted"][sel], 1e3 * r["measured"][sel], color=color_for(name), label=name, s=18)
        order = np.argsort(r["size"][sel])
        ax_r.plot(r["size"][sel][order] / 1e6, r["ratio"][sel][order], "o", color=color_for(name), label=name,
                  markersize=4)
    lo = 1e3 * float(min(r["predicted"].min(), r["measured"].min()))
    hi = 1e3 * float(max(r["predicted"].max(), r["measured"].max()))
    ax.plot([lo, hi], [lo, hi], "k--", linewidth=0.8, label="measured = predicted")
    ax.set_xscale("log")
    ax.set_yscale("log")
    plain_log(ax, "x")
    plain_log(ax, "y")
    ax.set_xlabel("alpha-beta prediction (ms)")
    ax.set_ylabel("measured over the link model (ms)")
    ax.set_title("allreduce: measured against predicted")
    ax.legend()
    ax_r.axhline(1.0, color="black", linewidth=0.8)
    ax_r.set_xscale("log")
    ax_r.set_xlabel("buffer per rank (MB)")
    ax_r.set_ylabel("measured / predicted")
    ax_r.set_title("model error by size")
    ax_r.legend()
    return finish(fig, args)


if __name__ == "__main__":
    sys.exit(main())

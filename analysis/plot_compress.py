"""Compression figure: compressed allreduce with error feedback against dense, per compressor and size.

Usage::

    python analysis/plot_compress.py results/compress-*.h5 -o results/compress.png

Reads hpcbench compression result files (kind ``compress``): the
``allreduce`` table (end-to-end time of the compressed allreduce against the
dense ring on the same modelled link, measured side by side; StellaTrain's
and GRACE's comparison) and the ``local`` table (compress time, selection
recall). Draws the speed-up over dense per compressor and result form
against the gradient size (one line per link), and the time split of the
largest size into encode, wire and decode. Prints one row per measurement.
Never imports MPI.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
from _style import color_for, figure_parser, finish, load_all, plain_log, pyplot

from hpcbench.results import read_attrs, read_table
from hpcbench.runtime.texttable import render


def load_run(path: Path) -> dict:
    """The ``allreduce`` rows of one compression file.

    Raises
    ------
    ValueError
        Not a compression file, or one without allreduce rows (``--no-allreduce``).
    """
    attrs = read_attrs(path)
    if attrs.get("kind") != "compress":
        raise ValueError(f"{path}: kind {attrs.get('kind')!r}, expected 'compress'")
    table = read_table(path, "allreduce")
    if not len(table["compressor"]):
        raise ValueError(f"{path}: no allreduce rows (run without --no-allreduce)")
    return {"path": path, "attrs": attrs, "allreduce": table}


def main(argv: list[str] | None = None) -> int:
    """Draw the figure and print the table; returns the exit status."""
    args = figure_parser(__doc__, "results/compress.png", "hpcbench compress result files (.h5)").parse_args(argv)
    try:
        runs = load_all(args.files, load_run, "plot_compress")
    except SystemExit as exc:
        return int(exc.code)
    rows = []
    for run in runs:
        t = run["allreduce"]
        for i in range(len(t["compressor"])):
            rows.append({k: (v[i].item() if hasattr(v[i], "item") else v[i]) for k, v in t.items()}
                        | {"ranks": int(run["attrs"].get("world_size", 0))})
    print("\n".join(render(
        ("compressor", "output", "size", "link", "ranks", "time", "dense", "speed-up", "encode", "wire", "decode",
         "wire bytes"),
        [(r["compressor"], r["output"], r["size_bytes"] / 1e6, r["link"], r["ranks"], r["time"], r["dense_time"],
          r["speedup"], 1e3 * r["encode"], 1e3 * r["wire"], 1e3 * r["decode"], r["wire_bytes"]) for r in rows],
        units=("", "", "(MB)", "", "", "(s)", "(s)", "(x)", "(ms)", "(ms)", "(ms)", "(B)"),
        formats=("s", "s", ".4g", "s", "d", ".4g", ".4g", ".2f", ".1f", ".1f", ".1f", "d"))))
    plt = pyplot()
    fig, (ax, ax_split) = plt.subplots(1, 2, figsize=(11.5, 4.3))
    lines = dict.fromkeys((r["compressor"], r["output"], r["link"]) for r in rows if r["compressor"] != "none")
    links = sorted({r["link"] for r in rows})
    for comp, output, link in lines:
        pts = sorted((r for r in rows if (r["compressor"], r["output"], r["link"]) == (comp, output, link)),
                     key=lambda r: r["size_bytes"])
        style = "-" if output == "dense" else "--"
        marker = "osd^v"[links.index(link) % 5]
        ax.plot([r["size_bytes"] / 1e6 for r in pts], [r["speedup"] for r in pts], linestyle=style, marker=marker,
                color=color_for(comp), label=f"{comp}, {output}" + (f", {link}" if len(links) > 1 else ""))
    ax.axhline(1.0, color="black", linewidth=0.8)
    ax.set_xscale("log")
    ax.set_yscale("log")
    plain_log(ax, "y")
    plain_log(ax, "x")
    ax.set_xlabel("gradient size (MB of float32)")
    ax.set_ylabel("dense time / compressed time")
    ax.set_title("compressed allreduce with error feedback vs dense ring")
    ax.legend()
    big = max(r["size_bytes"] for r in rows)
    at_big = [r for r in rows if r["size_bytes"] == big]
    labels = [f"{r['compressor']}\n{r['output']}, {r['link']}" for r in at_big] + ["dense ring"]
    encode = [1e3 * r["encode"] if r["encode"] == r["encode"] else 0.0 for r in at_big] + [0.0]
    wire = [1e3 * r["wire"] for r in at_big] + [1e3 * float(np.median([r["dense_time"] for r in at_big]))]
    decode = [1e3 * r["decode"] if r["decode"] == r["decode"] else 0.0 for r in at_big] + [0.0]
    x = np.arange(len(labels))
    ax_split.bar(x, encode, label="encode (error feedback + compress)", color="C0")
    ax_split.bar(x, wire, bottom=encode, label="wire (modelled link busy)", color="C1")
    ax_split.bar(x, decode, bottom=np.add(encode, wire), label="decode", color="C2")
    ax_split.set_xticks(x, labels, fontsize=7)
    ax_split.set_yscale("log")
    plain_log(ax_split, "y")
    ax_split.set_ylabel("ms per allreduce (max over ranks)")
    ax_split.set_title(f"where the time goes at {big / 1e6:g} MB")
    ax_split.legend(fontsize=7)
    return finish(fig, args)


if __name__ == "__main__":
    sys.exit(main())

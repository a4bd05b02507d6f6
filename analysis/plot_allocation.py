"""Sky's MILP against size: solve time and final gap per solver and device order.

Usage::

    python analysis/plot_allocation.py results/allocation-*.h5 -o results/allocation.png

Reads the files of ``python -m hpcbench.pipeline.bench`` (kind
``allocation``), prints one row per ``sky-milp`` run (size, order, solver,
status, solve time, objective against ``optimal``'s for the same order,
bound, gap, nodes, machine load) and the exact DP's solve time per size,
then draws two panels against the number of binary variables ``L x D``:

1. solve time of each (solver, order), filled markers where the solver
   proved optimality (or stopped on its relative gap), hollow where the time
   limit stopped it, beside ``optimal``'s (given order and order search);
2. the relative gap the solver was left with (0 when solved).

Also checks what the fixed-order rows solved to optimality must show: their
objective equals ``optimal``'s bottleneck in the same order with free links
(``reference_s``), and prints the largest relative difference. Never
imports MPI.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from hpcbench.results import read_attrs, read_table  # noqa: E402


def load_rows(path: Path) -> list[dict]:
    """Rows of the ``solves`` table of one allocation bench file.

    Raises
    ------
    ValueError
        If the file is not an allocation bench file.
    """
    attrs = read_attrs(path)
    if attrs.get("kind") != "allocation":
        raise ValueError(f"{path}: kind {attrs.get('kind')!r}, expected 'allocation'")
    t = read_table(path, "solves")
    return [{k: (v[i].item() if hasattr(v[i], "item") else v[i]) for k, v in t.items()} for i in range(len(t["layers"]))]


def _solved(status: str) -> bool:
    return status.split("+")[0] in ("optimal", "gap limit")


def main(argv: list[str] | None = None) -> int:
    """Print the table, draw the figure; returns the exit status."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("files", nargs="+", type=Path, help="hpcbench allocation bench files (.h5)")
    ap.add_argument("-o", "--output", type=Path, default=Path("results/allocation.png"))
    args = ap.parse_args(argv)
    rows = []
    for path in args.files:
        if not path.is_file():
            print(f"plot_allocation: error: {path}: no such file", file=sys.stderr)
            return 2
        try:
            rows += load_rows(path)
        except (OSError, KeyError, ValueError) as exc:
            print(f"plot_allocation: error: {exc}", file=sys.stderr)
            return 2
    milp = [r for r in rows if r["allocator"] == "sky-milp"]
    dp = [r for r in rows if r["allocator"] == "optimal"]
    print(f"{'size':>7} {'order':<6} {'solver':<6} {'status':<16} {'solve(s)':>9} {'limit(s)':>8} "
          f"{'obj/optimal':>11} {'bound(ms)':>10} {'gap':>7} {'nodes':>7} {'load':>5}")
    for r in sorted(milp, key=lambda r: (r["layers"] * r["devices"], r["order"], r["solver"])):
        print(f"{r['layers']:>3}x{r['devices']:<3} {r['order']:<6} {r['solver']:<6} {r['status']:<16} "
              f"{r['solve_s']:>9.3g} {r['time_limit_s']:>8.3g} {r['objective_s'] / r['reference_s']:>11.4f} "
              f"{r['bound_s'] * 1e3:>10.4g} {r['gap']:>7.1%} {r['nodes']:>7d} {r['load_1min']:>5.2f}")
    for r in sorted(dp, key=lambda r: (r["layers"] * r["devices"], r["order"])):
        print(f"{r['layers']:>3}x{r['devices']:<3} optimal ({r['order']}): {r['solve_s']:.3g} s")
    exact = [r for r in milp if r["order"] == "fixed" and r["status"].startswith("optimal")]
    if exact:
        diff = max(abs(r["objective_s"] / r["reference_s"] - 1) for r in exact)
        print(f"fixed-order MILP solved to optimality: {len(exact)} runs, objective = optimal's bottleneck "
              f"(same order, free links) within {diff:.2g} (relative)")
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.6))
    groups = sorted({(r["solver"], r["order"]) for r in milp})
    for solver, order in groups:
        rs = sorted((r for r in milp if (r["solver"], r["order"]) == (solver, order)),
                    key=lambda r: r["layers"] * r["devices"])
        x = np.array([r["layers"] * r["devices"] for r in rs])
        solved = np.array([_solved(r["status"]) for r in rs])
        for ax, y in ((axes[0], [r["solve_s"] for r in rs]), (axes[1], [r["gap"] for r in rs])):
            (h,) = ax.plot(x, y, "-", label=f"{solver}, {order} order")
            y = np.asarray(y, dtype=float)
            ax.scatter(x[solved], y[solved], color=h.get_color(), zorder=3)
            ax.scatter(x[~solved], y[~solved], facecolors="none", edgecolors=h.get_color(), zorder=3)
    for order, style in (("given", "k--"), ("search", "k:")):
        rs = sorted((r for r in dp if r["order"] == order), key=lambda r: r["layers"] * r["devices"])
        if rs:
            axes[0].plot([r["layers"] * r["devices"] for r in rs], [r["solve_s"] for r in rs], style,
                         label=f"optimal (DP, {order} order)")
    sizes = sorted({(r["layers"], r["devices"]) for r in milp}, key=lambda s: s[0] * s[1])
    for ax in axes:
        ax.set_xscale("log")
        ax.set_xticks([l * d for l, d in sizes], [f"{l}x{d}" for l, d in sizes], fontsize=7)
        ax.minorticks_off()
        ax.set_xlabel("layers x devices (binary variables of the MILP)")
    axes[0].set_yscale("log")
    axes[0].set_ylabel("solve time (s)")
    axes[0].set_title("filled: solved (optimal or within the gap); hollow: time limit", fontsize=9)
    axes[0].legend(fontsize=7)
    axes[1].set_ylabel("relative gap left (objective - bound) / objective")
    axes[1].set_title("gap of Sky's MILP when the solver stopped", fontsize=9)
    fig.tight_layout()
    args.output.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(args.output, dpi=130)
    print(f"figure: {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

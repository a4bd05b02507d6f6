"""KungFu's figure 5 analogue: throughput per step with an injected slow link, with and without ``interference``.

Usage::

    python analysis/plot_train_interference.py results/interference/*.h5 -o results/interference.png

Reads hpcbench training result files (kind ``train``) of the same job run with
and without the ``interference`` policy (a run is "with" when its config lists
the policy): the ``steps`` table's ``samples_per_s_total`` per step, the
``decisions`` table (the switch) and the config's ``link.slow`` (the step
``S`` the slow link starts). Per group (with / without; several files of a
group, e.g. interleaved repeats, are averaged step by step) it prints

- ``before``: mean throughput of the steps before ``S`` (the warm-up and step 0
  left out),
- ``after``: mean throughput from step ``S + within`` on (``--within``,
  default 10),

and the target: the fraction of the throughput the slow link took from the
run without the policy that the policy's run recovers within ``within``
steps, ``(after_with - after_without) / (before_without - after_without)``
(at least 0.8: reached). Draws throughput against the step, the slow link's
start and the switch marked. Never imports MPI.
"""

from __future__ import annotations

import ast
import sys

import numpy as np
from _style import figure_parser, finish, pyplot
from _train_results import load_runs

from hpcbench.results import read_table

#: the target of the issue: at least this fraction of the lost throughput recovered
TARGET = 0.8


def load_interference(run: dict) -> dict:
    """Per step of the file's (first) synchroniser entry: step, warm-up flag, samples/s; whether the policy ran,
    the slow link's first step, and the policy's switch (step, algorithm; None without one)."""
    path, cfg = run["path"], run["attrs"].get("config", {})
    steps = read_table(path, "steps")
    slow = cfg.get("link", {}).get("slow", [])
    if not slow:
        raise ValueError(f"{path}: no link.slow in its config (no slow link injected)")
    with_policy = any((p if isinstance(p, str) else p.get("name")) == "interference" for p in cfg.get("policies", []))
    dec = read_table(path, "decisions")
    switch = None
    algs = [algorithm_label(str(a.decode() if isinstance(a, bytes) else a)) for a in dec["algorithm"]]
    for i, a in enumerate(algs):
        if a:
            switch = (int(dec["step"][i]), a)
            break
    return {"label": path.stem, "with": with_policy, "slow_from": int(min(s["from_step"] for s in slow)),
            "step": np.asarray(steps["step"]), "warmup": np.asarray(steps["warmup"], dtype=bool),
            "throughput": np.asarray(steps["samples_per_s_total"], dtype=float), "switch": switch,
            "sync": str(cfg.get("sync", [""])[0])}


def algorithm_label(text: str) -> str:
    """A recorded algorithm for the legend: a name as it is; a name with options (the ``decisions`` table's text
    of a mapping, ``{'name': 'weighted_shards', 'weights': (0.0, ...)}``) as the name and the weights rounded.

    >>> algorithm_label("{'name': 'weighted_shards', 'weights': (0.0, 0.5, 0.5)}")
    'weighted_shards (weights 0.00, 0.50, 0.50)'
    """
    if not text.startswith("{"):
        return text
    d = ast.literal_eval(text)
    w = d.get("weights")
    return str(d["name"]) + (f" (weights {', '.join(f'{float(x):.2f}' for x in w)})" if w else "")


def group_mean(runs: list[dict]) -> np.ndarray:
    """Step-by-step mean throughput of runs of the same plan (raises ValueError if their steps differ)."""
    steps = runs[0]["step"]
    for r in runs[1:]:
        if not np.array_equal(r["step"], steps):
            raise ValueError(f"{r['label']}: its steps differ from {runs[0]['label']}'s (not the same plan)")
    return np.mean([r["throughput"] for r in runs], axis=0)


def recovery(runs: list[dict], within: int) -> dict:
    """The figure's numbers (module docstring): before/after means per group, the fraction recovered, the
    steps of the switch.

    Raises
    ------
    ValueError
        A group is missing, the runs' slow links start at different steps, or a window has no step.
    """
    groups = {k: [r for r in runs if r["with"] == k] for k in (True, False)}
    if not groups[True] or not groups[False]:
        raise ValueError("give runs with and without the interference policy (one of each at least)")
    starts = {r["slow_from"] for r in runs}
    if len(starts) != 1:
        raise ValueError(f"the runs' slow links start at different steps: {sorted(starts)}")
    s = starts.pop()
    out = {"slow_from": s, "within": within}
    for k, name in ((True, "with"), (False, "without")):
        steps, warm = groups[k][0]["step"], groups[k][0]["warmup"]
        tput = group_mean(groups[k])
        before = (steps < s) & ~warm & (steps > 0)
        after = steps >= s + within
        if not before.any() or not after.any():
            raise ValueError(f"no steps before step {s} or from step {s + within} on")
        out[name] = {"before": float(tput[before].mean()), "after": float(tput[after].mean()), "runs": len(groups[k]),
                     "steps": steps, "throughput": tput}
    w, wo = out["with"], out["without"]
    lost = wo["before"] - wo["after"]
    out["lost"] = lost
    out["recovered"] = (w["after"] - wo["after"]) / lost if lost > 0 else float("nan")
    out["switches"] = [r["switch"] for r in groups[True]]
    return out


def report_lines(res: dict) -> list[str]:
    """The printed summary."""
    w, wo, s, k = res["with"], res["without"], res["slow_from"], res["within"]
    sw = ", ".join(f"{a} before step {t}" if t is not None else "none" for t, a in
                   ((x if x else (None, None)) for x in res["switches"]))
    reached = "reached" if res["recovered"] >= TARGET else "NOT reached"
    return [f"slow link from step {s}; 'after' = steps >= {s + k}",
            f"without interference ({wo['runs']} runs): before {wo['before']:.1f} samples/s, after "
            f"{wo['after']:.1f} ({wo['after'] / wo['before'] - 1:+.1%})",
            f"with interference ({w['runs']} runs): before {w['before']:.1f} samples/s, after {w['after']:.1f} "
            f"({w['after'] / w['before'] - 1:+.1%}); switches: {sw}",
            f"lost to the slow link: {res['lost']:.1f} samples/s; recovered within {k} steps: "
            f"{res['recovered']:.1%} (target >= {TARGET:.0%}: {reached})"]


def plot(res: dict):
    """Throughput per step, both groups; the slow link's start and the switches marked; the figure."""
    fig, ax = pyplot().subplots(figsize=(8, 4))
    for name, style in (("without", "o-"), ("with", "s-")):
        g = res[name]
        ax.plot(g["steps"], g["throughput"], style, markersize=3, label=f"{name} interference")
    ax.axvline(res["slow_from"], color="grey", linestyle="--", linewidth=1, label="slow link starts")
    for sw in res["switches"]:
        if sw:
            ax.axvline(sw[0], color="C1", linestyle=":", linewidth=1, label=f"switch to {sw[1]}")
    ax.set_xlabel("step")
    ax.set_ylabel("samples/s (all workers)")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.suptitle("Adaptive communication under a slow link (KungFu figure 5)")
    return fig


def main(argv=None) -> int:
    parser = figure_parser(__doc__, "results/interference.png", "hpcbench train result files (.h5)")
    parser.add_argument("--within", type=int, default=10, help="steps after the slow link starts that the "
                                                               "recovery may take (default 10)")
    args = parser.parse_args(argv)
    runs = [load_interference(r) for r in load_runs(args.files, "plot_train_interference")]
    try:
        res = recovery(runs, args.within)
    except ValueError as exc:
        print(f"plot_train_interference: {exc}", file=sys.stderr)
        return 2
    for line in report_lines(res):
        print(line)
    return finish(plot(res), args)


if __name__ == "__main__":
    sys.exit(main())

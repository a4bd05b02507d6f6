"""Time to accuracy over seeds: the best fixed rate, DDP and threshold-v against the controller, median and spread.

Usage::

    python analysis/stellatrain_tta_seeds.py results/st-tta-s*.h5 --target 0.85

Reads the training result files ``scripts/stellatrain_tta.py --seeds ...``
writes (one file per run; the run's seed from the file's ``seed``
attribute, its entries from the ``steps`` and ``iterations`` tables) and
prints, per entry and seed, the modelled seconds to ``--target`` accuracy
(:func:`plot_stellatrain_tta.time_to`), then:

- the best fixed rate chosen by the sweep: the ``topk-R`` entry of least
  median time to the target over the seeds (the one of highest median final
  accuracy if none reaches it), and, as stricter checks, the best fixed
  top-k rate of each seed on its own and the fastest run of each seed that
  is not a controller (any top-k or threshold-v rate, ``ddp``);
- per seed, the ratio of each reference (the sweep's best fixed rate, the
  per-seed best, ``ddp``, ``thresholdv-R`` at the sweep's rate, and
  ``large-topk-R`` at each seed's best rate: fixed batches at the
  controller's bound) to each controller entry (``controller``,
  ``controller-lr``), their median and their range over the seeds (a
  reference run for some seeds only: over those, named), and whether the
  median reaches ``--ratio``
  (StellaTrain's claim as issue 22 states it: at least 1.3x less time to
  the target than the best fixed rate).

Both sides of every ratio come from the same seed's runs of one run set.
Exits 1 when a file cannot be read. Never imports MPI.
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

import numpy as np

from hpcbench.results import read_attrs

sys.path.insert(0, str(Path(__file__).resolve().parent))

from plot_stellatrain_tta import accuracy_curves, time_to  # noqa: E402

CONTROLLERS = ("controller", "controller-lr")


def collect(paths, target: float) -> tuple[dict, dict]:
    """Times to ``target`` and final accuracies, per entry and seed.

    Returns
    -------
    tta, final : dict of str to dict of int to float
        ``label -> {seed -> modelled seconds to target (inf: never)}`` and
        ``label -> {seed -> final held-out accuracy}``.

    Raises
    ------
    OSError, KeyError
        A file is not a readable training result file.
    """
    tta: dict[str, dict[int, float]] = {}
    final: dict[str, dict[int, float]] = {}
    for path in paths:
        seed = int(read_attrs(path)["seed"])
        for label, c in accuracy_curves(path).items():
            tta.setdefault(label, {})[seed] = time_to(c, target)
            final.setdefault(label, {})[seed] = float(c["accuracy"][-1])
    return tta, final


def best_fixed(tta: dict, final: dict, seeds: list[int]) -> str:
    """The ``topk-R`` entry of least median time to target over ``seeds`` (none reaching it: best median accuracy).

    Raises
    ------
    KeyError
        No ``topk-R`` entry holds every seed.
    """
    fixed = [k for k in tta if k.startswith("topk-") and all(s in tta[k] for s in seeds)]
    if not fixed:
        raise KeyError("no topk-R entry with every seed")
    return min(fixed, key=lambda k: (float(np.median([tta[k][s] for s in seeds])),
                                     -float(np.median([final[k][s] for s in seeds]))))


def ratios(tta: dict, reference: dict[int, float], controller: str, seeds: list[int]) -> np.ndarray:
    """Per seed: ``reference`` seconds over ``controller``'s (float64, shape (len(seeds),); inf/inf is NaN)."""
    with np.errstate(invalid="ignore"):
        return np.array([reference[s] / tta[controller][s] for s in seeds], dtype=np.float64)


def report(tta: dict, final: dict, target: float, ratio: float) -> list[str]:
    """The lines printed: the table of times, the sweep's choice, the ratios with median and range.

    Raises
    ------
    KeyError
        No ``topk-R`` entry holds every seed.
    """
    seeds = sorted(set().union(*(v.keys() for v in tta.values())))
    lines = [f"time to {target:g} accuracy (modelled s) per seed; final accuracy median",
             f"{'entry':<18} " + " ".join(f"{'s' + str(s):>7}" for s in seeds) + f" {'median':>7} {'final':>6}"]
    for label in sorted(tta, key=lambda k: (k not in ("ddp",), k in CONTROLLERS, k)):
        vals = [tta[label].get(s, math.nan) for s in seeds]
        lines.append(f"{label:<18} " + " ".join(f"{v:>7.2f}" for v in vals)
                     + f" {float(np.median(list(tta[label].values()))):>7.2f}"
                     + f" {float(np.median(list(final[label].values()))):>6.3f}")
    best = best_fixed(tta, final, seeds)
    rate = best.split("-", 1)[1]

    def fastest(labels):
        return {s: min(tta[k][s] for k in labels if s in tta[k]) for s in seeds
                if any(s in tta[k] for k in labels)}

    refs = {f"best fixed rate ({best}, the sweep's)": tta[best],
            "best fixed rate of each seed": fastest([k for k in tta if k.startswith("topk-")]),
            "fastest other run of each seed": fastest([k for k in tta if k not in CONTROLLERS])}
    for k in ("ddp", f"thresholdv-{rate}"):
        if k in tta:
            refs[k] = tta[k]
    large = {s: t for k in tta if k.startswith("large-") for s, t in tta[k].items()}
    if large:
        refs["large-topk (the seed's best rate, every batch at the bound)"] = large
    lines.append(f"best fixed rate chosen by the sweep (least median time over {len(seeds)} seeds): {best}")
    for c in CONTROLLERS:
        if c not in tta or not all(s in tta[c] for s in seeds):
            continue
        for name, ref in refs.items():
            have = [s for s in seeds if s in ref]
            r = ratios(tta, ref, c, have)
            ok = r[~np.isnan(r)]
            med, lo, hi = (float(np.median(ok)), float(ok.min()), float(ok.max())) if ok.size else (math.nan,) * 3
            verdict = "" if len(have) == len(seeds) else f"  (seeds {', '.join(map(str, have))} only)"
            if name.startswith("best fixed rate"):
                verdict = f"  (target >= {ratio:g}x: {'reached' if med >= ratio else 'NOT reached'})"
            lines.append(f"{name} / {c}: " + " ".join(f"{v:.2f}" for v in r)
                         + f"; median {med:.2f}x, range {lo:.2f}-{hi:.2f}{verdict}")
    return lines


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("files", nargs="+", type=Path, help="hpcbench train result files (.h5), one run each")
    ap.add_argument("--target", type=float, default=0.85, help="held-out accuracy to reach")
    ap.add_argument("--ratio", type=float, default=1.3, help="target of best fixed / controller")
    args = ap.parse_args(argv)
    try:
        tta, final = collect(args.files, args.target)
        lines = report(tta, final, args.target, args.ratio)
    except (OSError, KeyError, ValueError) as exc:
        print(f"stellatrain_tta_seeds: {exc}", file=sys.stderr)
        return 1
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""``python -m hpcbench.train.reporting.whatif RESULT.h5 --workers 64``: every synchroniser's alpha-beta efficiency.

Reads a training result file's compute timeline (root attributes
``forward_s``, ``backward_s``, ``optimizer_s``) and gradient buckets (table
``buckets``), and prints, for each synchroniser with a cost model, the
predicted step time and efficiency at the given worker counts over a link of
``--latency-s`` and ``--bandwidth`` (:func:`hpcbench.train.synchronisation.predict.predict_step`).
No MPI job: it only evaluates formulas, e.g. for a worker count whose
emulation does not fit the machine's memory.
"""

from __future__ import annotations

import argparse
import sys

import numpy as np

__all__ = ["main"]


def main(argv: list[str] | None = None) -> int:
    """Print the table; returns the exit status (2 on a bad file or argument)."""
    from hpcbench.collectives.cost import link_beta
    from hpcbench.collectives.linkmodel import parse_rate
    from hpcbench.results import read_attrs, read_table
    from hpcbench.sync import SYNCHRONISERS
    from hpcbench.train.synchronisation.predict import link_cost, predict_step
    from hpcbench.train.steps.profile import ComputeProfile

    ap = argparse.ArgumentParser(prog="hpcbench.train.reporting.whatif", description=__doc__.split("\n\n")[0])
    ap.add_argument("file", help="hpcbench train result file (.h5)")
    ap.add_argument("--workers", type=int, nargs="+", default=[64])
    ap.add_argument("--bandwidth", default="10Gbit")
    ap.add_argument("--latency-s", type=float, default=1e-5)
    ap.add_argument("--schedule", choices=("fifo", "priority"), default="fifo",
                    help="bucket schedule to predict (priority needs the file's buckets.need_s)")
    args = ap.parse_args(argv)
    try:
        attrs = read_attrs(args.file)
        if attrs.get("kind") != "train":
            raise ValueError(f"kind {attrs.get('kind')!r}, expected 'train'")
        b = read_table(args.file, "buckets")
        beta = link_beta(parse_rate(args.bandwidth))
        if args.schedule == "priority" and "need_s" not in b:
            raise KeyError("buckets.need_s (written since the priority schedule); --schedule priority needs it")
    except (OSError, KeyError, ValueError) as exc:
        print(f"hpcbench.train.reporting.whatif: error: {args.file}: {exc}", file=sys.stderr)
        return 2
    prof = ComputeProfile(float(attrs["forward_s"]), float(attrs["backward_s"]), float(attrs["optimizer_s"]),
                          np.zeros(0), ())
    print(f"{attrs['model']}: compute {1e3 * prof.compute_s:.1f} ms per step, {int(np.sum(b['bytes'])) / 1e6:.1f} MB "
          f"in {len(b['bytes'])} buckets, link {args.bandwidth}, latency {args.latency_s:g} s, schedule {args.schedule}")
    print(f"{'sync':<18} {'model':<18} " + " ".join(f"{'p=' + str(p):>14}" for p in args.workers))
    for name, cls in SYNCHRONISERS.items():
        model = cls.cost_model
        if model is None or not cls.uses_transport:
            continue
        cells = []
        for p in args.workers:
            cost = link_cost(cls, p, args.latency_s, beta)
            step, eff, _ = predict_step(prof, b["bytes"], b["ready_s"], cost, cls.averages, args.schedule,
                                        b.get("need_s"))
            cells.append(f"{eff:>6.3f} ({1e3 * step:>5.0f}ms)")
        print(f"{name:<18} {model:<18} " + " ".join(cells))
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Is emulated compute sound? Throughput of emulated (dilated and not) against real runs, and
measured communication against the alpha-beta model.

Usage::

    python analysis/train_soundness.py REAL.h5 EMULATED.h5 [DILATED.h5 ...]

The first file is the reference (normally ``compute: real``); every other
file's throughput per synchroniser is printed as a ratio to it (the issue's
bar: within 5 %). For every file and synchroniser whose link is modelled, the
mean communication span per step is printed beside the alpha-beta time of
its reductions one after the other (``predicted_comm_s``; with ``overlap:
false`` the two measure the same thing; the bar: within 15 %). Never imports
MPI.
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _train_results import load_runs, summary_rows  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    """Print the ratios; returns the exit status."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("files", nargs="+", type=Path, help="hpcbench train result files, the reference first")
    args = ap.parse_args(argv)
    try:
        runs = load_runs(args.files, "train_soundness")
    except SystemExit as exc:
        return int(exc.code)
    per_file = [{r["sync"]: r for r in summary_rows([run]) if r["variant"] == "none"} for run in runs]
    ref = per_file[0]
    print(f"{'file':<36} {'compute':<9} {'dil':>5} {'overlap':>7} {'sync':<14} {'img/s/worker':>12} {'/ref':>7} "
          f"{'comm ms':>8} {'a-b ms':>8} {'meas/a-b':>8}")
    for run, rows in zip(runs, per_file):
        a = run["attrs"]
        for name, r in rows.items():
            base = ref.get(name)
            ratio = r["img_per_s_worker"] / base["img_per_s_worker"] if base else math.nan
            comm, pred = 1e3 * r["comm_span_s"], 1e3 * r["predicted_comm_s"]
            print(f"{run['path'].name[:36]:<36} {r['compute']:<9} {r['dilation']:>5g} {str(a.get('overlap')):>7} "
                  f"{name:<14} {r['img_per_s_worker']:>12.2f} {ratio:>7.3f} {comm:>8.1f} {pred:>8.1f} "
                  f"{comm / pred if pred > 0 else math.nan:>8.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

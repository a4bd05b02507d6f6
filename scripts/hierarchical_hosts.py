"""The hierarchical allreduce against ring, binary_tree_star and MPI on emulated hosts, with a modelled link
between hosts; every result file kept.

    python scripts/hierarchical_hosts.py OUTDIR [--layouts 2x2,4x1] [--links 1Gbit,10Gbit]

Per layout (emulated hosts, :mod:`hpcbench.runtime.emulated_hosts`), two jobs:

* ``hpcbench.bench.costmodel --link-scope between_hosts``: measured time of
  ``hierarchical``, ``binary_tree_star`` and ``ring`` when every message
  between hosts takes the modelled time (messages inside a host: shared
  memory), against the two-level prediction
  (:func:`hpcbench.collectives.linkcost.predict_allreduce_hosts`), busbw per
  size, ``--dilation 4``;
* ``hpcbench collectives -a mpi,ring,binary_tree_star,hierarchical --link RATE
  --link-scope between_hosts`` per rate: the same algorithms beside MPI, whose
  messages are not modelled (its column is the real loopback).

The load average before and after each job goes to ``OUTDIR/loads.json``.
``--table`` prints the markdown table of docs/collectives.md from the kept
files of OUTDIR instead of running anything.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

from hpcbench.runtime import launch

LAYOUTS = {"2x2": (2, 2), "4x1": (1, 1, 1, 1)}
ALGS = "hierarchical,binary_tree_star,ring"


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("outdir")
    p.add_argument("--layouts", default="2x2,4x1")
    p.add_argument("--links", default="1Gbit,10Gbit")
    p.add_argument("--sizes-mb", default="0.25,1,4")
    p.add_argument("--table", action="store_true", help="print the table from OUTDIR's files and exit")
    a = p.parse_args(argv)
    out = Path(a.outdir)
    if a.table:
        print(table(out, a.layouts.split(","), a.links.split(",")))
        return 0
    out.mkdir(parents=True, exist_ok=True)
    loads = []
    for name in a.layouts.split(","):
        hosts = LAYOUTS[name]
        jobs = [(f"costmodel-{name}", ["-m", "hpcbench.bench.costmodel", "--links", a.links, "--alphas", "5e-5",
                                       "--sizes-mb", a.sizes_mb, "--algorithms", ALGS, "--link-scope",
                                       "between_hosts", "--dilation", "4", "--reps", "5",
                                       "--output", str(out / f"costmodel-{name}.h5")])]
        for rate in a.links.split(","):
            jobs.append((f"collectives-{name}-{rate}",
                         ["-m", "hpcbench.bench.collectives", "-a", "mpi,ring,binary_tree_star,hierarchical",
                          "-b", "256K", "-e", "4M", "-f", "4", "--link", rate, "--link-alpha", "5e-5",
                          "--link-scope", "between_hosts", "--rounds", "3",
                          "--output", str(out / f"collectives-{name}-{rate}.h5")]))
        for tag, args in jobs:
            before = os.getloadavg()
            t0 = time.time()
            proc = launch.run_mpi(sum(hosts), args, timeout=900, hosts=hosts)
            (out / f"{tag}.txt").write_text(proc.stdout + proc.stderr)
            loads.append({"job": tag, "hosts": list(hosts), "rc": proc.returncode, "load_before": before,
                          "load_after": os.getloadavg(), "wall_s": time.time() - t0,
                          "start": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(t0))})
            print(json.dumps(loads[-1]), flush=True)
    (out / "loads.json").write_text(json.dumps({"cores": os.cpu_count(), "jobs": loads}, indent=1))
    return 0


def table(out: Path, layouts, links) -> str:
    """Markdown rows: per layout, link and size, each algorithm's busbw (GB/s) and measured/predicted time of
    the costmodel job, and the collectives job's busbw of MPI (unmodelled) and of the three algorithms."""
    from hpcbench.collectives.linkmodel import parse_rate
    from hpcbench.results import read_table

    algs = ALGS.split(",")
    head = ("| hosts | link | size | " + " | ".join(f"{a} busbw GB/s (meas./pred. ms)" for a in algs)
            + " | sweep busbw GB/s: mpi (not modelled) / " + " / ".join(algs) + " |")
    lines = [head, "|" + "---|" * (4 + len(algs)) ]
    for name in layouts:
        cm = read_table(out / f"costmodel-{name}.h5", "results")
        for rate in links:
            bps = parse_rate(rate)
            sweep = read_table(out / f"collectives-{name}-{rate}.h5", "results")
            for size in sorted(set(int(x) for x in cm["size"])):
                cells = []
                for alg in algs:
                    i = [k for k in range(len(cm["size"])) if cm["size"][k] == size and cm["algorithm"][k] == alg
                         and cm["link"][k] == bps][0]
                    cells.append(f"{cm['busbw'][i] / 1e9:.3f} ({cm['measured'][i] * 1e3:.1f}/"
                                 f"{cm['predicted'][i] * 1e3:.1f})")
                near = min(set(int(x) for x in sweep["size"]), key=lambda b: abs(b - size))
                bw = {str(sweep["impl"][k]): sweep["busbw"][k] for k in range(len(sweep["size"]))
                      if sweep["size"][k] == near}
                sw = " / ".join(f"{bw.get(x, float('nan')):.3f}" for x in ["mpi", *algs])
                lines.append(f"| {name} | {rate} | {size / 1e6:g} MB | " + " | ".join(cells)
                             + f" | {sw} ({near >> 10} KiB) |")
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())

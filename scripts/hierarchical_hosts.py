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
    a = p.parse_args(argv)
    out = Path(a.outdir)
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


if __name__ == "__main__":
    sys.exit(main())

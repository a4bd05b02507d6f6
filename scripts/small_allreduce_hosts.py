"""Per-call time of a small MPI allreduce on emulated hosts, per MPICH network setting, interleaved.

    python scripts/small_allreduce_hosts.py [--bytes 1024] [--calls 300] [--repeats 3] [-o OUT.json]

For each layout (ranks per host) and each setting (MPICH's environment: the
default UCX network module, ``MPIR_CVAR_CH4_NETMOD=ofi`` with libfabric's
``tcp`` provider, ...), launches ``mpiexec`` on emulated hosts
(:mod:`hpcbench.runtime.emulated_hosts`) running ``MPI_Allreduce`` of
``--bytes`` bytes ``--calls`` times after a warm-up; rank 0 reports the
mean per call. Configurations take turns ``--repeats`` times (so load
changes fall on all alike); the load average is recorded with each
launch. Writes every reading to ``-o`` as JSON.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

from hpcbench.runtime import launch

PROBE = r"""
import sys, time
import numpy as np
from mpi4py import MPI
c = MPI.COMM_WORLD
n, calls = int(sys.argv[1]), int(sys.argv[2])
a = np.ones(max(1, n // 4), np.float32); b = np.empty_like(a)
for _ in range(50):
    c.Allreduce(a, b)
c.Barrier()
t = time.perf_counter()
for _ in range(calls):
    c.Allreduce(a, b)
dt = (time.perf_counter() - t) / calls
dt = c.allreduce(dt, op=MPI.MAX)
if c.rank == 0:
    print("PER_CALL_S", dt)
"""

SETTINGS = {
    "ucx (default)": {},
    "ofi tcp": {"MPIR_CVAR_CH4_NETMOD": "ofi", "FI_PROVIDER": "tcp"},
}
LAYOUTS = {"1 host x 2": [2], "2 hosts x 1": [1, 1], "1 host x 4": [4], "2 hosts x 2": [2, 2]}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--bytes", type=int, default=1024)
    p.add_argument("--calls", type=int, default=300)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("-o", "--output", default=None)
    a = p.parse_args(argv)
    rows = []
    for rep in range(a.repeats):
        for lname, hosts in LAYOUTS.items():
            for sname, env in SETTINGS.items():
                if len(hosts) == 1 and env:
                    continue                    # one host: shared memory only, the netmod is not used
                load = os.getloadavg()[0]
                proc = launch.run_mpi(sum(hosts), ["-c", PROBE, str(a.bytes), str(a.calls)], timeout=300,
                                      env=env, hosts=hosts if len(hosts) > 1 else None)
                per = [float(line.split()[1]) for line in proc.stdout.splitlines() if line.startswith("PER_CALL_S")]
                row = {"layout": lname, "setting": sname if len(hosts) > 1 else "shared memory",
                       "repeat": rep, "per_call_us": per[0] * 1e6 if per else None, "rc": proc.returncode,
                       "load_1min_before": load, "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
                rows.append(row)
                print(json.dumps(row), flush=True)
    if a.output:
        with open(a.output, "x") as f:
            json.dump({"bytes": a.bytes, "calls": a.calls, "cores": os.cpu_count(), "rows": rows}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python
"""Overhead of the variance monitors at interval 1: no monitor, the trace estimator, KungFu's elementwise one.

One training job (under ``mpiexec``) trains figure 8's ResNet-18 and cycles
its measured iterations through the variants ``none``, ``variance_trace``
(``{name: variance, estimator: trace}``: one scalar allreduce) and
``variance`` (KungFu's elementwise definition: a second allreduce of every
squared gradient), so that drifts of the machine's load fall on every side
alike (``interleave_monitors``). Printed: each variant's img/s per worker,
step time and time in the monitor, and each monitor's throughput against no
monitor; the 1-minute load average before and after.

Target (issue 21): the trace estimator costs at most 3 % of throughput at
interval 1 (the elementwise one: +30.6 % of step time in the figure 8 run).

Usage (repository root)::

    mpiexec -n 2 python scripts/monitor_overhead.py [TRAIN FLAGS...]   # e.g. --iterations 9
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from hpcbench.runtime.wakeup import block_wake_signal  # noqa: E402

block_wake_signal()     # before mpi4py and torch start threads (hpcbench.runtime.wakeup)

from hpcbench.train.job import TrainJob  # noqa: E402

DEFAULTS = ["jobs/configs/train-fig8.yaml", "--monitors", "[{name: variance, estimator: trace}, variance]",
            "--interleave_monitors", "true", "--monitor_interval", "1", "--iterations", "6",
            "--progress", "false", "--job_name", "monitor-overhead"]


def main() -> int:
    from mpi4py import MPI

    from hpcbench.lifecycle import run
    from hpcbench.results import read_table

    out = "results/monitor-overhead.h5"
    comm = MPI.COMM_WORLD
    load0 = os.getloadavg()
    status = run(TrainJob, [*DEFAULTS, "--output", out, "--overwrite", *sys.argv[1:]], comm=comm)
    if status or comm.rank:
        return status
    load1 = os.getloadavg()
    steps, it = read_table(out, "steps"), read_table(out, "iterations")
    measured, variant = ~steps["warmup"], steps["variant"].astype(str)
    rows = {}
    for v in dict.fromkeys(it["variant"].astype(str)):
        sel = measured & (variant == v)
        img = it["img_per_s_worker"][it["variant"].astype(str) == v]
        rows[v] = (float(img.mean()), float(img.std()), float(steps["step_s"][sel].mean()),
                   float(steps["monitor_s"][sel].mean()), int(sel.sum()))
    base = rows["none"]
    print(f"\nvariance monitors at interval 1, {comm.size} ranks, iterations interleaved "
          f"(load {load0[0]:.2f} before, {load1[0]:.2f} after)")
    print(f"{'variant':<16} {'img/s/worker':>12} {'+-std':>6} {'step_s':>8} {'monitor_ms':>10} {'steps':>6} "
          f"{'img/s x none':>12} {'overhead':>9}")
    for v, (img, sd, step, mon, n) in rows.items():
        print(f"{v:<16} {img:>12.2f} {sd:>6.2f} {step:>8.4f} {1e3 * mon:>10.2f} {n:>6} {img / base[0]:>12.4f} "
              f"{100 * (base[0] / img - 1):>+8.1f}%")
    print("overhead: (img/s of none) / (img/s of the variant) - 1, i.e. the extra time per sample; target for "
          "variance_trace <= 3 %")
    return 0


if __name__ == "__main__":
    sys.exit(main())

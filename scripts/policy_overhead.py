#!/usr/bin/env python
"""Overhead of the policy machinery: every hook called on every rank, one agreement exchange per step, no decision.

One training job (under ``mpiexec``) runs two entries of the same synchroniser
with their iterations interleaved (``interleave_sync``: the machine's load
drifts fall on both alike): ``without`` has no policy; ``with`` has
``--policies`` probe policies that implement all six of KungFu's hooks, read
the step's telemetry and decide nothing, so the step loop calls every hook
and makes the (empty) proposals collective after every step. Printed: each
side's img/s per worker and step time, their ratio, and the machinery's own
time per step (every hook call and the exchange, timed on each rank; the
exchange includes waiting for the slower rank) over the step time.

Target (issue 21): at most 1 % of step time.

Usage (repository root; the defaults are figure 8's ResNet-18 at 64x64, batch 32)::

    mpiexec -n 2 python scripts/policy_overhead.py [--policies 4] [TRAIN FLAGS...]
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from hpcbench.runtime.wakeup import block_wake_signal  # noqa: E402

block_wake_signal()     # before mpi4py and torch start threads (hpcbench.runtime.wakeup)

from hpcbench.policies import Policy  # noqa: E402
from hpcbench.train.adaptation.policyhook import PolicyHook  # noqa: E402
from hpcbench.train.job import TrainJob  # noqa: E402

DEFAULTS = ["jobs/configs/train-fig8.yaml", "--monitors", "[]", "--interleave_monitors", "false",
            "--sync", "[{name: ring, label: without}, {name: ring, label: with}]", "--interleave_sync", "true",
            "--warmup", "2", "--iterations", "6", "--batches_per_iter", "5", "--progress", "false",
            "--job_name", "policy-overhead"]


class Probe(Policy):
    """All six hooks, reading the telemetry as a policy would; never a decision."""

    name, decides = "probe", frozenset({"batch_size"})

    def before_train(self, ctx):
        self.steps = 0

    def before_epoch(self, ctx):
        return None

    def before_step(self, ctx):
        return None

    def after_step(self, ctx, telemetry):
        self.steps += 1
        self.last = telemetry["step_s"], telemetry.global_batch

    def after_epoch(self, ctx):
        return None

    def after_train(self, ctx):
        return None


class TimedHook(PolicyHook):
    """The policies' hook, with the seconds spent in it (its hooks and the agreement exchange)."""

    spent = 0.0

    def _call(self, *args, **kwargs):
        t0 = time.perf_counter()
        try:
            return super()._call(*args, **kwargs)
        finally:
            TimedHook.spent += time.perf_counter() - t0

    def agree(self, ctx):
        t0 = time.perf_counter()
        try:
            return super().agree(ctx)
        finally:
            TimedHook.spent += time.perf_counter() - t0


class ProbedJob(TrainJob):
    """Entry ``with`` gets the probes; entry ``without`` none."""

    probes = 4

    def _policies(self, label):
        if label != "with":
            return None
        return TimedHook([(f"probe#{i}", Probe()) for i in range(self.probes)], self.comm)


def main() -> int:
    from mpi4py import MPI

    from hpcbench.lifecycle import run
    from hpcbench.results import read_table

    argv = sys.argv[1:]
    if "--policies" in argv:
        i = argv.index("--policies")
        ProbedJob.probes = int(argv[i + 1])
        del argv[i:i + 2]
    out = "results/policy-overhead.h5"
    comm = MPI.COMM_WORLD
    status = run(ProbedJob, [*DEFAULTS, "--output", out, "--overwrite", *argv], comm=comm)
    spent = comm.gather(TimedHook.spent, root=0)
    if status or comm.rank:
        return status
    steps = read_table(out, "steps")
    label, measured = steps["sync"].astype(str), ~steps["warmup"]
    it = read_table(out, "iterations")
    sides = {}
    for side in ("without", "with"):
        rows = measured & (label == side)
        img = it["img_per_s_worker"][it["sync"].astype(str) == side]
        sides[side] = (float(img.mean()), float(steps["step_s"][rows].mean()), int(rows.sum()))
    n_with = int((label == "with").sum())       # every step of the entry, warm-up included, ran the hooks
    per_rank = [x / n_with for x in spent]
    per_step = min(per_rank)    # the rank that reaches the exchange last waits for no one: its own cost
    (img0, step0, n0), (img1, step1, n1) = sides["without"], sides["with"]
    print(f"\npolicy machinery overhead, {comm.size} ranks, {ProbedJob.probes} probe policies (all six hooks, "
          f"no decision), iterations interleaved")
    print(f"{'side':<10} {'img/s/worker':>12} {'step_s':>9} {'steps':>6}")
    print(f"{'without':<10} {img0:>12.2f} {step0:>9.4f} {n0:>6}")
    print(f"{'with':<10} {img1:>12.2f} {step1:>9.4f} {n1:>6}")
    print(f"ratio with/without: img/s {img1 / img0:.4f}, step time {step1 / step0:.4f} "
          f"(throughput overhead {100 * (1 - img1 / img0):+.2f} %, within the iterations' noise)")
    print(f"machinery timed on each rank: {', '.join(f'{1e3 * x:.3f}' for x in per_rank)} ms per step (a rank "
          f"that reaches the exchange first waits there for the others, e.g. for rank 0's report)")
    print(f"machinery's own cost (the rank that arrives last): {1e3 * per_step:.3f} ms per step = "
          f"{100 * per_step / step1:.3f} % of the step time (target <= 1 %)")
    return 0


if __name__ == "__main__":
    sys.exit(main())

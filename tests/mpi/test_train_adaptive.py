"""gns_batch and sync_switch in whole training jobs (any world size 1..4): the run follows the policy's rule on the
GNS it recorded; KungFu's fixed-step switch from SMA to S-SGD happens before its step."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import torch

from hpcbench.lifecycle import run
from hpcbench.policies import PolicyContext, Telemetry
from hpcbench.policies.gns_batch import GnsBatch
from hpcbench.results import read_table
from hpcbench.train.job import TrainJob

BASE = ["--model", "digits_mlp", "--warmup", "0", "--iterations", "2", "--batches_per_iter", "3", "--lr", "0.1",
        "--bucket_mb", "0.002", "--progress", "false", "--profile_steps", "1"]
COLUMN = "gns_gns_b_simple"


def _output(comm, tmp_path_factory, name):
    return comm.bcast(str(tmp_path_factory.mktemp("adapt") / name) if comm.rank == 0 else None, root=0)


def test_gns_batch_run_replays_from_its_recorded_noise_scale(comm, tmp_path_factory):
    """The steps' batches are what a fresh policy decides from the run's own recorded GNS column, step by step
    (one world size 1: no GNS, the start batch throughout)."""
    torch.set_num_threads(1)
    section = "{name: gns_batch, start: 4, cycle_steps: 1, max_batch: 64}"
    out = _output(comm, tmp_path_factory, "g.h5")
    assert run(TrainJob, [*BASE, "--batch_size", "8", "--monitors", "[gns]", "--policies", f"[{section}]",
                          "--output", out], comm=comm) == 0
    if comm.rank:
        return
    p = comm.size
    steps, d = read_table(out, "steps"), read_table(out, "decisions")
    policy = GnsBatch(GnsBatch.Config(start=4, cycle_steps=1, max_batch=64))

    def ctx(t, sizes):
        return PolicyContext(rank=0, world_size=p, step=t, epoch=0, samples=0, epoch_size=1347,
                             batch_sizes=sizes, learning_rate=0.1, sync="ring", algorithm="ring", total_steps=6)

    sizes = (policy.before_train(ctx(-1, (8,) * p)).batch_size,) * p
    want = []
    for t, gns in enumerate(steps[COLUMN]):
        want.append(sum(sizes))
        tel = Telemetry(t, 0, ("loss",), np.zeros(1), None, {COLUMN: float(gns)}, sizes)
        decision = policy.after_step(ctx(t, sizes), tel)
        if decision is not None:
            sizes = (decision.batch_size,) * p
    assert list(steps["global_batch"]) == want
    assert list(d["policy"].astype(str)) == ["gns_batch"] * len(d["step"]) and d["step"][0] == 0
    assert list(d["batch_size"].astype(str))[0] == "4"
    if p == 1:
        assert np.all(np.isnan(steps[COLUMN])) and want == [4] * 6
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "analysis"))
    import plot_train_adaptive

    (c,) = plot_train_adaptive.curves(out)          # the figure's reading of the file
    assert list(c["batch"]) == want and len(c["time"]) == len(c["accuracy"]) == 2
    np.testing.assert_allclose(c["time"][-1], steps["step_s"].sum())      # warmup 0: every step timed
    assert plot_train_adaptive.time_to(c, 2.0) != plot_train_adaptive.time_to(c, 2.0)     # never: NaN


def test_sync_switch_at_step_is_kungfus_adaptive_sgd(comm, tmp_path_factory):
    """SMA (alpha 0.1) for steps 0..2, ring from step 3 (decided before training, KungFu's change_step), recorded
    once; the applier's model broadcast at the switch is tested in test_train_policies.py."""
    torch.set_num_threads(1)
    out = _output(comm, tmp_path_factory, "s.h5")
    assert run(TrainJob, [*BASE, "--batch_size", "8", "--sync", "[{name: sma, alpha: 0.1}]", "--policies",
                          "[{name: sync_switch, at_step: 3, to: ring}]", "--output", out], comm=comm) == 0
    if comm.rank:
        return
    d = read_table(out, "decisions")
    assert list(d["step"]) == [3] and list(d["decided_step"]) == [-1]
    assert list(d["synchroniser"].astype(str)) == ["ring"]
    assert list(d["policy"].astype(str)) == ["sync_switch"]

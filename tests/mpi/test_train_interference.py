"""The injected slow link and the interference policy through whole training jobs (any world size 1..4)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from hpcbench.lifecycle import run
from hpcbench.policies import POLICIES, Policy
from hpcbench.results import read_table
from hpcbench.train.adaptation.policyhook import PolicyHook
from hpcbench.train.job import TrainJob

# The star over 19.2 kB of gradients: 61 ms per copy. The vote compares wall-clock allreduce spans, so the
# modelled wire time must dwarf what a loaded machine adds to a step (at 10 Mbit/s, 15 ms per copy, a run
# at load 20 once voted a step before the slow-down).
SLOW_FROM, FACTOR, RATE = 3, 4.0, 2.5e6
BASE = ["--model", "digits_mlp", "--warmup", "1", "--iterations", "2", "--batches_per_iter", "3", "--lr", "0.1",
        "--batch_size", "8", "--progress", "false", "--profile_steps", "1", "--sync", "[star]",
        "--link.kind", "model", "--link.latency_s", "0", "--link.bandwidth", f"{RATE / 1e6:g}Mbit",
        "--link.slow", f"[{{rank: 0, from_step: {SLOW_FROM}, factor: {FACTOR:g}}}]"]


class LinkLog(Policy):
    """Decides nothing; records this rank's seconds per byte on its link and the algorithm, each step."""

    name = "link_log"

    def __init__(self):
        super().__init__()
        self.seen = []

    def after_step(self, ctx, telemetry):
        sent = telemetry["sent_bytes"]
        self.seen.append((ctx.step, telemetry["link_busy_s"] / sent if sent else np.nan, ctx.algorithm))


def _run(comm, tmp_path_factory, monkeypatch, with_policy: bool):
    logs = []

    def policies(self, label):
        logs.append(LinkLog())
        built = [("link_log", logs[-1])]
        if with_policy:
            built.insert(0, ("interference", POLICIES["interference"](POLICIES["interference"].Config())))
        return PolicyHook(built, self.comm)

    monkeypatch.setattr(TrainJob, "_policies", policies)
    out = comm.bcast(str(tmp_path_factory.mktemp("if") / "r.h5") if comm.rank == 0 else None, root=0)
    assert run(TrainJob, [*BASE, "--output", out], comm=comm) == 0
    return logs[0].seen, out


def test_slow_link_slows_one_ranks_link_from_its_step(comm, tmp_path_factory, monkeypatch):
    """Rank 0's link takes 8 / 2.5 Mbit/s = 3.2e-6 s per byte until step 2 and 4 times that from step 3; the other
    ranks' links keep 3.2e-6 (the modelled wire times, exact up to rounding); with one rank nothing is sent."""
    torch.set_num_threads(1)
    seen, _ = _run(comm, tmp_path_factory, monkeypatch, with_policy=False)
    assert [t for t, *_ in seen] == list(range(7))
    per_byte = np.array([b for _, b, _ in seen])
    if comm.size == 1:
        assert np.all(np.isnan(per_byte))
        return
    want = np.full(7, 8 / RATE)
    if comm.rank == 0:
        want[SLOW_FROM:] *= FACTOR
    np.testing.assert_allclose(per_byte, want, rtol=1e-9)


def test_interference_switches_every_rank_away_from_the_star(comm, tmp_path_factory, monkeypatch):
    """Rank 0 (the star's root) slowed 4x from step 3: every rank's allreduce throughput falls (the root's
    broadcast paces all), every rank votes after step 3, and all switch, before the same step, to the algorithm
    the per-link model prices fastest (one where the root sends no more than the others: at 3 and 4 ranks
    weighted_shards with rank 0 owning no shard, at 2 the ring or its equals); one rank: no vote."""
    torch.set_num_threads(1)
    seen, out = _run(comm, tmp_path_factory, monkeypatch, with_policy=True)
    algs = [a for *_, a in seen]
    assert all(a == a2 for a, a2 in zip(algs, comm.bcast(algs, root=0)))
    if comm.size == 1:
        assert set(algs) == {"star"}
        return
    switch = next(t for t, *_, a in seen if a != "star")
    assert SLOW_FROM < switch <= SLOW_FROM + 2
    assert algs[-1] in (("ring", "rabenseifner", "recursive_doubling") if comm.size == 2 else ("weighted_shards",))
    comm.Barrier()
    if comm.rank == 0:
        d = read_table(out, "decisions")
        assert list(d["policy"].astype(str)) == ["interference"] and list(d["step"]) == [switch]
        recorded = list(d["algorithm"].astype(str))
        assert len(recorded) == 1 and "slowest link rank 0" in str(d["reason"].astype(str)[0])
        if comm.size == 2:
            assert recorded == [algs[-1]]
        else:       # the name and the weights the model priced: none for the slow rank
            assert recorded[0].startswith("{'name': 'weighted_shards', 'weights': (0.0, ")

"""Policies through whole training jobs in this MPI job (any world size 1..4).

A policy's decision takes effect before the same step on every rank; batch
changes re-slice the data and keep the replicas identical; switches of
synchroniser and algorithm keep training one model; the agreement checks
(KungFu's consensus, rank 0's decision, summed votes) hold at any size.
"""

from __future__ import annotations

import hashlib
from types import SimpleNamespace

import numpy as np
import pytest
import torch

from hpcbench.lifecycle import run
from hpcbench.policies import Decision, Policy, PolicyError, Vote
from hpcbench.results import read_table
from hpcbench.train.adaptation.policyhook import PolicyHook
from hpcbench.train.job import TrainJob

BASE = ["--model", "digits_mlp", "--warmup", "1", "--iterations", "2", "--batches_per_iter", "3", "--lr", "0.1",
        "--bucket_mb", "0.002", "--progress", "false", "--profile_steps", "1"]


class Trace(Policy):
    """Decides nothing; records what every hook saw (step, batch sizes, learning rate, synchroniser)."""

    name = "trace"
    decides = frozenset({"batch_size", "sync", "algorithm"})

    def __init__(self, decisions=None):
        super().__init__()
        self.seen, self.decisions = [], dict(decisions or {})

    def before_step(self, ctx):
        self.seen.append((ctx.step, ctx.batch_sizes, ctx.learning_rate, ctx.sync, ctx.algorithm))

    def after_step(self, ctx, telemetry):
        assert telemetry.batch_sizes == ctx.batch_sizes and telemetry.step == ctx.step
        return self.decisions.get(ctx.step)


def _output(comm, tmp_path_factory, name):
    return comm.bcast(str(tmp_path_factory.mktemp("pol") / name) if comm.rank == 0 else None, root=0)


def _digest(model) -> str:
    h = hashlib.sha256()
    for p in model.parameters():
        h.update(p.detach().numpy().tobytes())
    return h.hexdigest()


def _same_everywhere(comm, value) -> bool:
    return all(v == value for v in comm.allgather(value))


def test_batch_schedule_changes_every_ranks_batch_before_the_same_step(comm, workers, tmp_path_factory, monkeypatch):
    """Worked by hand: schedule {0: 4, 3: 8, 5: 2} and learning rate 0.05 at key 3 over 7 steps (1 warm-up + 2 x 3):
    global batches 4p, 4p, 4p, 8p, 8p, 2p, 2p; decisions before steps 0, 3, 5, agreed after -1, 2, 4; img/s from
    the batches each step had; replicas identical on every rank."""
    torch.set_num_threads(1)
    traces = []

    def policies(self, label):
        from hpcbench.policies import POLICIES

        traces.append(Trace())
        scheduled = POLICIES["batch_schedule"](POLICIES["batch_schedule"].Config(
            batch_size={0: 4, 3: 8, 5: 2}, learning_rate={3: 0.05}))
        return PolicyHook([("batch_schedule", scheduled), ("trace", traces[-1])], self.comm)

    monkeypatch.setattr(TrainJob, "_policies", policies)
    out = _output(comm, tmp_path_factory, "b.h5")
    assert run(TrainJob, [*BASE, "--batch_size", "16", "--sync", "[ring]", "--output", out], comm=comm) == 0
    p = comm.size
    want = [(4,) * p] * 3 + [(8,) * p] * 2 + [(2,) * p] * 2
    for trace in traces:
        assert [s for _, s, *_ in trace.seen] == want
        assert [lr for _, _, lr, *_ in trace.seen] == [0.1] * 3 + [0.05] * 4
        assert _same_everywhere(comm, trace.seen)
    (w,) = workers
    assert _same_everywhere(comm, _digest(w.model)) and all(g["lr"] == 0.05 for g in w.optimizer.param_groups)
    comm.Barrier()
    if comm.rank:
        return
    d = read_table(out, "decisions")
    assert list(d["sync"].astype(str)) == ["ring"] * 3 and list(d["policy"].astype(str)) == ["batch_schedule"] * 3
    assert list(d["step"]) == [0, 3, 5] and list(d["decided_step"]) == [-1, 2, 4]
    assert list(d["batch_size"].astype(str)) == ["4", "8", "2"]
    np.testing.assert_array_equal(d["learning_rate"], [np.nan, 0.05, np.nan])
    steps = read_table(out, "steps")
    assert list(steps["global_batch"]) == [4 * p] * 3 + [8 * p] * 2 + [2 * p] * 2
    np.testing.assert_array_equal(steps["samples_per_s_total"], steps["global_batch"] / steps["step_s"])
    it = read_table(out, "iterations")
    ring = (steps["sync"].astype(str) == "ring") & ~steps["warmup"]
    for i in (0, 1):
        rows = ring & (steps["iteration"] == i)
        assert it["img_per_s_worker"][i] == pytest.approx(steps["batch_size"][rows].sum() / steps["step_s"][rows].sum())


def test_switches_of_synchroniser_and_algorithm_keep_training_one_model(comm, workers, tmp_path_factory,
                                                                          monkeypatch):
    """SMA to S-SGD (ring) before step 2, broadcasting rank 0's model, then ring's algorithm to tree before step 4:
    after the switch the replicas are identical (they differed under SMA) and stay so."""
    torch.set_num_threads(1)
    trace = Trace({1: Decision(sync={"name": "ring"}, reason="test"), 3: Decision(algorithm="tree")})

    def policies(self, label):
        return PolicyHook([("switcher", trace)], self.comm)

    monkeypatch.setattr(TrainJob, "_policies", policies)
    out = _output(comm, tmp_path_factory, "s.h5")
    assert run(TrainJob, [*BASE, "--batch_size", "8", "--sync", "[sma]", "--output", out], comm=comm) == 0
    assert [(s, a) for _, _, _, s, a in trace.seen] == [("sma", None)] * 2 + [("ring", "ring")] * 2 + [
        ("ring", "tree")] * 3
    assert len(workers) == 2 and workers[0].model is workers[1].model          # one model, two replicas' worker
    assert _same_everywhere(comm, _digest(workers[1].model))
    comm.Barrier()
    if comm.rank == 0:
        d = read_table(out, "decisions")
        assert list(d["step"]) == [2, 4] and list(d["synchroniser"].astype(str)) == ["{'name': 'ring'}", ""]
        assert list(d["algorithm"].astype(str)) == ["", "tree"]


class _Fake:
    """The smallest run context a PolicyHook needs (no model, no loop)."""

    def __init__(self, comm):
        self.state = SimpleNamespace(rank=comm.rank, sizes=(8,) * comm.size, lr=0.1)
        self.setup = SimpleNamespace(settings=SimpleNamespace(epoch_size=None))
        self.sync = SimpleNamespace(name="ring", switches_algorithm=False)
        self.plan, self.samples, self.epoch, self.step = None, 0, 0, 0


class _OnRanks(Policy):
    name, decides = "on_ranks", frozenset({"batch_size"})

    def __init__(self, agreement, deciders, vote=False):
        super().__init__()
        self.agreement, self.deciders, self.vote, self.totals = agreement, deciders, vote, []

    def before_train(self, ctx):
        if self.vote:
            return Vote(ctx.rank + 1)
        if ctx.rank in self.deciders(ctx.world_size):
            return Decision(batch_size=4 + ctx.rank if self.agreement == "root" else 4)
        return None

    def tally(self, ctx, total):
        self.totals.append(total)
        return Decision(batch_size=int(total))


def test_consensus_root_and_votes_agree_at_any_size(comm):
    p = comm.size
    hook = PolicyHook([("all", _OnRanks("consensus", range))], comm)       # every rank, the same decision
    hook.before_train(_Fake(comm))
    assert [(n, d.batch_size, t) for n, d, t in hook.due(0)] == [("all", 4, -1)]
    root = PolicyHook([("root", _OnRanks("root", lambda n: [0]))], comm)  # rank 0 decides 4, others nothing
    root.before_train(_Fake(comm))
    assert [d.batch_size for _, d, _ in root.due(0)] == [4]
    voter = _OnRanks("consensus", range, vote=True)
    votes = PolicyHook([("votes", voter)], comm)
    votes.before_train(_Fake(comm))
    assert voter.totals == [p * (p + 1) / 2] and [d.batch_size for _, d, _ in votes.due(0)] == [p * (p + 1) // 2]
    if p > 1:       # rank 0 alone proposes: no consensus, on every rank
        lone = PolicyHook([("lone", _OnRanks("consensus", lambda n: [0]))], comm)
        with pytest.raises(PolicyError, match="policy 'lone': ranks disagree on the decision after step -1"):
            lone.before_train(_Fake(comm))

"""Policies on recorded telemetry, by hand: the contract's types, batch_schedule's decisions, the data stream."""

from __future__ import annotations

import numpy as np
import pytest
from pydantic import ValidationError

from hpcbench.policies import POLICIES, Decision, PolicyContext, Telemetry, Vote
from hpcbench.policies.batch_schedule import BatchSchedule, parse_schedule


def _ctx(step: int, epoch: int = 0, sizes=(8, 8)) -> PolicyContext:
    return PolicyContext(rank=0, world_size=len(sizes), step=step, epoch=epoch, samples=0, epoch_size=None,
                         batch_sizes=tuple(sizes), learning_rate=0.1, sync="ring", algorithm="ring",
                         total_steps=10)


def _telemetry(step: int) -> Telemetry:
    return Telemetry(step, 0, ("step_s", "loss"), np.array([0.1, 2.0]), None, {}, (8, 8))


def _schedule(**section) -> BatchSchedule:
    return BatchSchedule(BatchSchedule.Config(**section))


def test_step_schedule_follows_kungfus_count_of_trained_steps():
    """KungFu: after the k-th trained step (after_step of step k - 1), key k; key 0 from the start. Worked by hand
    for {0: 16, 3: 32, 5: 8} with a learning rate at key 3: decisions before step 0, 3 and 5, nothing else."""
    policy = _schedule(batch_size={0: 16, 3: 32, 5: 8}, learning_rate={3: 0.02})
    assert policy.before_train(_ctx(-1)) == Decision(batch_size=16, reason="step 0 of the schedule")
    got = {t: policy.after_step(_ctx(t), _telemetry(t)) for t in range(8)}
    assert {t: (d.batch_size, d.learning_rate) for t, d in got.items() if d is not None} == {2: (32, 0.02), 4: (8, None)}
    assert all(d.at_step is None for d in got.values() if d is not None)      # the next step: 3 and 5
    assert policy.after_epoch(_ctx(4, epoch=1)) is None                        # a step schedule ignores epochs


def test_epoch_schedule_decides_after_the_epoch_before_its_key():
    policy = _schedule(unit="epoch", batch_size="0:16, 2:64", learning_rate="2:0.4")
    assert policy.before_train(_ctx(-1)).batch_size == 16
    assert policy.after_epoch(_ctx(41, epoch=1)) is None
    d = policy.after_epoch(_ctx(83, epoch=2))
    assert (d.batch_size, d.learning_rate, d.reason) == (64, 0.4, "epoch 2 of the schedule")
    assert all(policy.after_step(_ctx(t), _telemetry(t)) is None for t in range(100))
    assert policy.config.needs_epochs() and not _schedule(unit="epoch", batch_size={0: 4}).config.needs_epochs()


def test_schedule_strings_and_bad_schedules():
    assert parse_schedule("0:32, 100:64,") == {0: 32, 100: 64} and parse_schedule({1: 2}) == {1: 2}
    assert parse_schedule("3:0.5") == {3: 0.5}
    for bad, needle in [({"batch_size": {3: 0}}, "batch_size.3"), ({"batch_size": {-1: 8}}, "batch_size.-1"),
                        ({"batch_size": "10-64"}, "not KEY:VALUE"), ({"unit": "day", "batch_size": {0: 8}}, "unit"),
                        ({}, "give a schedule"), ({"batch_size": {0: 8}, "bogus": 1}, "bogus"),
                        ({"learning_rate": {2: -0.1}}, "learning_rate.2")]:
        with pytest.raises(ValidationError, match=needle):
            BatchSchedule.Config(**bad)


def test_decisions_validate_and_digest_their_values():
    d = Decision(batch_size=(8, 16), learning_rate=0.05, reason="r")
    assert d.changes() == {"batch_size": (8, 16), "learning_rate": 0.05}
    assert d.digest() == Decision(batch_size=(8, 16), learning_rate=0.05, reason="r").digest()
    assert d.digest() != Decision(batch_size=(8, 16), learning_rate=0.05000001, reason="r").digest()
    assert len(d.digest()) == 8
    for bad, needle in [({"batch_size": 0}, "batch_size"), ({"batch_size": (8, 0)}, "batch_size"),
                        ({"batch_size": True}, "batch_size"), ({"learning_rate": float("nan")}, "learning_rate"),
                        ({"workers": 0}, "workers"), ({"batch_size": 8, "at_step": -1}, "at_step"),
                        ({}, "at least one")]:
        with pytest.raises(ValueError, match=needle):
            Decision(**bad)
    assert Vote().value == 1.0


def test_telemetry_reads_fields_and_every_rank_where_gathered():
    tel = Telemetry(3, 0, ("step_s", "loss"), np.array([0.1, 2.0]), np.array([[0.1, 2.0], [0.3, 1.0]]), {}, (4, 8))
    assert tel["loss"] == 2.0 and tel.column("step_s").tolist() == [0.1, 0.3] and tel.global_batch == 12
    with pytest.raises(KeyError, match="no telemetry field 'nope'; fields: step_s, loss"):
        tel["nope"]
    with pytest.raises(ValueError, match="needs_all_ranks"):
        _telemetry(0).column("loss")


def test_every_registered_policy_declares_its_contract():
    from hpcbench.policies.decision import FIELDS

    for name, cls in POLICIES.items():
        assert cls.name == name and cls.decides and set(cls.decides) <= set(FIELDS)
        assert cls.agreement in ("root", "consensus") and cls.__doc__


def test_stellatrain_policy_turns_controller_decisions_into_decisions_at_latest_plus_3():
    """2:1 workers (backward 32/400 and 32/200 s per sample): the policy's decisions are the controller's,
    batch per worker and kept fraction, at its effective step, its record as the detail; rank 1 decides nothing."""
    from dataclasses import replace

    from hpcbench.controller import ThroughputModel
    from hpcbench.policies.stellatrain import StellaTrain
    from hpcbench.telemetry import TelemetryRecord
    from hpcbench.train.reporting.tables import STEP_FIELDS

    models = [ThroughputModel(32, 400), ThroughputModel(32, 200)]
    ctx = replace(_ctx(-1, sizes=(16, 16)), message_elements=(25_000_000,))
    fields = STEP_FIELDS + TelemetryRecord.names()

    def drive(pol):
        sizes, ratio, out = (16, 16), 0.02, []
        for s in range(40):
            recs = [TelemetryRecord(s, i, 0.0, 0.01, float(models[i].time(sizes[i])), 0.0, 0.0, 1e8, 1e8, 1e8, 1e8,
                                    sizes[i], 1, ratio, 1e8) for i in range(2)]
            rows = np.array([np.concatenate([np.zeros(len(STEP_FIELDS)), r.vector()]) for r in recs])
            d = pol.after_step(replace(ctx, step=s, batch_sizes=sizes),
                               Telemetry(s, 0, fields, rows[0], rows, {}, sizes))
            if d is not None:
                out.append((s, d))
                sizes, ratio = d.batch_size, d.ratio
        return out

    pol = StellaTrain(StellaTrain.Config(max_batch=64, min_batch=4, initial_ratio=0.02))
    first = pol.before_train(ctx)
    assert first == Decision(ratio=0.02, reason="initial compression ratio")
    assert StellaTrain(StellaTrain.Config()).before_train(replace(ctx, rank=1)) is None
    out = drive(pol)
    assert [s for s, _ in out][:2] == [7, 14]                 # warm-up, then every 4 steps after the last effect
    for s, d in out:
        assert d.at_step == s + 3 == d.detail.effective_step and d.batch_size == d.detail.batches
        assert d.ratio == pytest.approx(1 - d.detail.compression_rate)
        assert set(d.changes()) <= StellaTrain.decides and d.learning_rate is None
    assert out[-1][1].detail.phase == "running" and out[-1][1].batch_size == (64, 32)
    assert out[-1][1].detail.estimate_bps == pytest.approx(1e8)      # the delivered rate, every step 100 Mbit/s
    # scale_lr: the learning rate follows the global batch (linear scaling from the starting 32)
    scaled = StellaTrain(StellaTrain.Config(max_batch=64, min_batch=4, initial_ratio=0.02, scale_lr=True))
    scaled.before_train(ctx)
    for _, d in drive(scaled):
        assert d.learning_rate == pytest.approx(ctx.learning_rate * sum(d.batch_size) / 32)
    with pytest.raises(ValueError, match="bandwidth estimator"):
        StellaTrain.Config(estimator="peak")

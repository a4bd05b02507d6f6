"""gns_batch (KungFu's figure 4 policies) on recorded telemetry, worked by hand; its config errors."""

from __future__ import annotations

import numpy as np
import pytest
from pydantic import ValidationError

from hpcbench.policies import POLICIES, PolicyContext, Telemetry
from hpcbench.policies.gns_batch import CappedEMA, GnsBatch

NAN = float("nan")


def _ctx(step: int, sizes, epoch: int = 0, epoch_size=None, lr: float = 0.1) -> PolicyContext:
    return PolicyContext(rank=0, world_size=len(sizes), step=step, epoch=epoch, samples=0, epoch_size=epoch_size,
                         batch_sizes=tuple(sizes), learning_rate=lr, sync="ring", algorithm="ring", total_steps=None)


def _tel(step: int, sizes, gns: float) -> Telemetry:
    return Telemetry(step, 0, ("step_s",), np.array([0.1]), None, {"gns_gns_b_simple": gns}, tuple(sizes))


def _policy(**section) -> GnsBatch:
    return POLICIES["gns_batch"](GnsBatch.Config(**section))


def test_capped_ema_is_kungfus():
    """kungfu.utils.EMA(0.9, 2): seeded, then each value capped to [v/2, 2v] and v <- 0.9 v + 0.1 x."""
    e = CappedEMA(0.9, 2.0)
    assert e.update(2.0) == 2.0
    assert e.update(3.0) == pytest.approx(2.1)          # 3 is within [1, 4]
    assert e.update(10.0) == pytest.approx(2.31)        # 10 capped to 4.2
    assert e.update(0.0) == pytest.approx(2.0790 + 0.1155)   # 0 capped to 1.155


def test_ratio_rule_by_hand():
    """cycle_steps 2, 2 workers at 32. EMA of |GNS|/32: 64/32 = 2 (seed), 96/32 = 3 -> 2.1, end of cycle 1
    (reference 2.1); 320/32 = 10 capped to 4.2 -> 2.31, NaN (not observed) -> 2.31, end of cycle 2: scale
    2.31 / 2.1 = 1.1, batch int(32 x 1.1) = 35. At 35: 0 capped to 1.155 -> 2.1945, 3500/35 = 100 capped to
    4.389 -> 2.41395; cycle 3: scale 1.1495, int(35 x 1.1495) = 40."""
    p = _policy(cycle_steps=2)
    first = p.before_train(_ctx(-1, (16, 16)))
    assert first.batch_size == 32 and first.learning_rate is None
    s = (32, 32)
    got = [p.after_step(_ctx(t, s), _tel(t, s, g)) for t, g in enumerate([64.0, 96.0, 320.0, NAN])]
    assert got[:3] == [None, None, None] and got[3].batch_size == 35 and p.history == pytest.approx([2.1, 2.31])
    s = (35, 35)
    got = [p.after_step(_ctx(t, s), _tel(t, s, g)) for t, g in [(4, 0.0), (5, 3500.0)]]
    assert got[0] is None and got[1].batch_size == 40 and p.ema.value == pytest.approx(2.41395)
    assert p.after_epoch(_ctx(5, s, epoch=1)) is None   # cycles are steps here, not epochs


def test_ratio_rule_scale_is_clamped_and_capped():
    """A falling ratio (scale < 1) keeps the batch; a rise beyond x2 doubles at most; max_batch and the data
    (epoch_size // workers) cap it. A cycle is an epoch by default."""
    p = _policy(max_batch=100)
    p.before_train(_ctx(-1, (32, 32)))
    s = (32, 32)
    p.after_step(_ctx(0, s), _tel(0, s, 320.0))         # ema 10
    assert p.after_epoch(_ctx(0, s, epoch=1)) is None    # cycle 1: the reference
    p.after_step(_ctx(1, s), _tel(1, s, 32.0))          # 1 capped to 5 -> 9.5
    assert p.after_epoch(_ctx(1, s, epoch=2)) is None    # scale 0.95 -> 1: the same batch, no decision
    p.ema.value = 50.0                                   # as if the ratio had grown fivefold
    assert p.after_epoch(_ctx(2, s, epoch=3)).batch_size == 64       # scale 5 clamped to 2
    s = (64, 64)
    assert p.after_epoch(_ctx(3, s, epoch=4)).batch_size == 100      # 128 > max_batch
    s = (100, 100)
    q = _policy()
    assert q.before_train(_ctx(-1, s, epoch_size=150)).batch_size == 32
    q.ema.value, q.history = 8.0, [2.0]
    assert q._cycle(_ctx(9, (32, 32), epoch_size=100)).batch_size == 50   # 64 > 100 // 2 samples per worker


def test_epoch_doubling_by_hand_with_linear_learning_rate():
    """KungFu's GNSPolicy: double after an epoch whose EMA rose over the previous epoch's; the learning rate
    follows (0.1 x batch / 32)."""
    p = _policy(rule="epoch_doubling", scale_lr=True, start=32)
    d = p.before_train(_ctx(-1, (32, 32), lr=0.1))
    assert (d.batch_size, d.learning_rate) == (32, pytest.approx(0.1))
    s = (32, 32)
    p.after_step(_ctx(0, s), _tel(0, s, 64.0))          # 2
    assert p.after_epoch(_ctx(0, s, epoch=1)) is None    # first epoch: the reference
    p.after_step(_ctx(1, s), _tel(1, s, 96.0))          # 3 -> 2.1 > 2
    d = p.after_epoch(_ctx(1, s, epoch=2))
    assert (d.batch_size, d.learning_rate) == (64, pytest.approx(0.2))
    s = (64, 64)
    p.after_step(_ctx(2, s), _tel(2, s, 64.0))          # 1 capped to 1.05 -> 1.995 < 2.1
    assert p.after_epoch(_ctx(2, s, epoch=3)) is None
    p.after_step(_ctx(3, s), _tel(3, s, 640.0))         # 10 capped to 3.99 -> 2.1945 > 1.995
    d = p.after_epoch(_ctx(3, s, epoch=4, epoch_size=200))
    assert (d.batch_size, d.learning_rate) == (100, pytest.approx(0.1 * 100 / 32))   # 128 > 200 // 2
    assert all(p.after_step(_ctx(t, s), _tel(t, s, 1.0)) is None for t in range(4, 9))


def test_no_signal_no_decision():
    p = _policy(cycle_steps=1)
    p.before_train(_ctx(-1, (32,)))
    assert all(p.after_step(_ctx(t, (32,)), _tel(t, (32,), NAN)) is None for t in range(5))
    assert p.ema.value is None and p.history == []


@pytest.mark.parametrize("section, needle", [
    ({"rule": "halving"}, "rule"), ({"start": 64, "max_batch": 32}, "start: 64"), ({"alpha": 1.0}, "alpha"),
    ({"cap": 1.0}, "cap"), ({"rule": "epoch_doubling", "cycle_steps": 3}, "cycle_steps: 3"),
    ({"start": 0}, "start"), ({"typo": 1}, "typo"),
])
def test_bad_sections(section, needle):
    with pytest.raises(ValidationError, match=needle):
        GnsBatch.Config(**section)


def test_config_names_key_and_value():
    """Through the training config: a bad value names its dotted key; a policy reading a monitor the job
    lacks names the output."""
    from hpcbench.runtime.config import ConfigError
    from hpcbench.train.config import load_config

    with pytest.raises(ConfigError, match=r"policies\.0\.gns_batch\.max_batch.* 0"):
        load_config(None, {"model": "digits_cnn", "monitors": "[gns]",
                           "policies": "[{name: gns_batch, max_batch: 0}]"})
    with pytest.raises(ConfigError, match="reads 'gns_gns_b_simple', which is no telemetry field"):
        load_config(None, {"model": "digits_cnn", "policies": "[gns_batch]"})
    cfg = load_config(None, {"model": "digits_cnn", "monitors": "[gns]", "policies": "[gns_batch]"})
    assert cfg.policies[0].rule == "ratio"

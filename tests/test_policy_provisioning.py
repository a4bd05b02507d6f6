"""provisioning (KungFu's figure 6 throughput rule) on recorded telemetry, by hand."""

from __future__ import annotations

import numpy as np
import pytest
from pydantic import ValidationError

from hpcbench.policies import POLICIES, PolicyContext, Telemetry
from hpcbench.policies.provisioning import Provisioning


def _ctx(step: int, n: int, rank: int = 0, pool: int | None = 4) -> PolicyContext:
    return PolicyContext(rank=rank, world_size=n, step=step, epoch=0, samples=0, epoch_size=None,
                         batch_sizes=(32,) * n, learning_rate=0.1, sync="ring", algorithm="ring", total_steps=None,
                         max_workers=pool)


def _tel(step: int, n: int, step_s) -> Telemetry:
    """Every rank's step_s (rank 0 has them all); 32 samples per worker."""
    s = np.broadcast_to(np.asarray(step_s, dtype=float), (n,)).reshape(n, 1)
    return Telemetry(step, 0, ("step_s",), s[0], s, {}, (32,) * n)


def _block(p, start: int, n: int, times):
    """Run ``len(times)`` steps at ``n`` workers; the decisions returned."""
    return [p.after_step(_ctx(start + i, n), _tel(start + i, n, t)) for i, t in enumerate(times)]


def test_throughput_rule_by_hand():
    """change_step 4, alpha 0.33, 32 samples per worker. N=1: steps 0.2, 0.2 (first half, ignored), 0.1, 0.1:
    T(1) = 320/s >= 0 -> 2 workers. N=2 (64 samples): 0.5, 0.5, 0.12, 0.12 (rank 1 slower at the last: 0.125
    counts): mean(512, 533.3) = 522.7/s >= (1 + 0.33/2) 320 = 372.8 -> 3. N=3 (96): 0.2 at the end: 480/s <
    (1 + 0.11) 522.67 = 580.16 -> back to 2, and no more decisions."""
    p = POLICIES["provisioning"](Provisioning.Config(change_step=4, alpha=0.33))
    got = _block(p, 0, 1, [0.2, 0.2, 0.1, 0.1])
    assert got[:3] == [None] * 3 and got[3].workers == 2 and p.throughput == {1: pytest.approx(320.0)}
    got = [p.after_step(_ctx(4 + i, 2), _tel(4 + i, 2, t)) for i, t in
           enumerate([0.5, 0.5, [0.12, 0.125], 0.12])]
    assert got[3].workers == 3 and p.throughput[2] == pytest.approx((512 + 64 / 0.12) / 2)
    got = _block(p, 8, 3, [0.3, 0.3, 0.2, 0.2])
    assert got[3].workers == 2 and "T(3) = 480.0/s < (1 + 0.33/3) T(2) = 580.2/s" in got[3].reason
    assert p.stopped and _block(p, 12, 2, [0.01] * 8) == [None] * 8


def test_stops_at_the_pool_or_the_cap_and_only_rank_0_decides():
    p = POLICIES["provisioning"](Provisioning.Config(change_step=2, alpha=0.0))
    assert _block(p, 0, 1, [0.1, 0.1])[1].workers == 2
    assert [p.after_step(_ctx(2 + i, 2, pool=2), _tel(2 + i, 2, 0.1)) for i in range(2)] == [None, None]
    assert p.stopped                                          # 2 workers = the ranks started: nothing to add
    q = POLICIES["provisioning"](Provisioning.Config(change_step=2, max_workers=1))
    assert _block(q, 0, 1, [0.1, 0.1]) == [None, None] and q.stopped
    r = POLICIES["provisioning"](Provisioning.Config(change_step=2))
    assert [r.after_step(_ctx(t, 2, rank=1), _tel(t, 2, 0.1)) for t in range(4)] == [None] * 4
    assert r.agreement == "root" and r.decides == {"workers"}


def test_bad_sections():
    for section, needle in (({"change_step": 1}, "change_step"), ({"alpha": -0.1}, "alpha"),
                            ({"max_workers": 0}, "max_workers")):
        with pytest.raises(ValidationError, match=needle):
            Provisioning.Config(**section)

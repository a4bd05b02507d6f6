"""Two-phase waiting of the collectives: spin for the measured cost of a sleep, then sleep."""

from __future__ import annotations

import time

import pytest

from hpcbench.collectives import waiting
from hpcbench.collectives.waiting import SPIN_MAX_S, SPIN_MIN_S, SleepCost, TwoPhaseBackoff


def test_sleep_cost_tracks_measured_sleeps():
    cost = SleepCost(initial_s=1.0, weight=1.0)
    took = cost.sleep(1e-4)
    assert took >= 1e-4 and cost.value_s == took
    assert SPIN_MIN_S <= cost.spin_budget() <= SPIN_MAX_S
    cost.value_s = 10.0
    assert cost.spin_budget() == SPIN_MAX_S
    cost.value_s = 0.0
    assert cost.spin_budget() == SPIN_MIN_S
    with pytest.raises(ValueError, match="weight"):
        SleepCost(weight=0.0)


def test_spins_for_the_budget_then_sleeps_growing(monkeypatch):
    cost = SleepCost(initial_s=1e-3, weight=0.5)
    slept = []
    monkeypatch.setattr(waiting.time, "sleep", slept.append)
    bo = TwoPhaseBackoff(first_s=1e-5, max_s=4e-5, cost=cost)
    t0 = time.perf_counter()
    while not slept:
        bo.pause()
    assert time.perf_counter() - t0 >= 1e-3          # spun for the estimated sleep cost
    for _ in range(3):
        bo.pause()
    assert slept == [1e-5, 2e-5, 4e-5, 4e-5]
    assert cost.value_s < 1e-3                        # the (instant) first sleep was measured
    bo.reset()
    bo.pause()
    assert len(slept) == 4                            # spinning again after a reset

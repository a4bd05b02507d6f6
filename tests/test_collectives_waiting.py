"""Two-phase waiting of the collectives: spin for the measured cost of a sleep, then sleep."""

from __future__ import annotations

import time

import pytest

from hpcbench.collectives import waiting
from hpcbench.collectives.waiting import (LARGE_BYTES, SPIN_BYTES_MAX_S, SPIN_LARGE_MAX_S,
                                          SPIN_LARGE_RATE_BPS, SPIN_MAX_S, SPIN_MIN_S, SPIN_RATE_BPS,
                                          SleepCost, TwoPhaseBackoff)


def test_sleep_cost_tracks_measured_sleeps():
    cost = SleepCost(initial_s=1.0, weight=1.0)
    took = cost.sleep(1e-4)
    assert took >= 1e-4 and cost.value_s == took
    assert SPIN_MIN_S <= cost.spin_budget() <= SPIN_MAX_S
    cost.value_s = SPIN_MAX_S
    assert cost.spin_budget() == SPIN_MAX_S          # spins as long as a sleep costs...
    cost.value_s = 2 * SPIN_MAX_S
    assert cost.spin_budget() == SPIN_MIN_S          # ...but briefly on an oversubscribed node
    cost.value_s = 0.0
    assert cost.spin_budget() == SPIN_MIN_S
    with pytest.raises(ValueError, match="weight"):
        SleepCost(weight=0.0)


def test_spin_budget_covers_the_operation_bytes():
    """A wait inside a large operation spins as long as its bytes take at SPIN_RATE_BPS
    (capped), on a quiet and on an oversubscribed node alike; small ones keep the sleep cost."""
    cost = SleepCost(initial_s=1e-4, weight=1.0)
    assert cost.spin_budget(1024) == cost.spin_budget() == 1e-4
    mib = 1 << 20
    assert cost.spin_budget(mib) == pytest.approx(mib / SPIN_RATE_BPS)
    assert cost.spin_budget(LARGE_BYTES) == pytest.approx(min(LARGE_BYTES / SPIN_RATE_BPS,
                                                              SPIN_BYTES_MAX_S))
    cost.value_s = 2 * SPIN_MAX_S                       # oversubscribed
    assert cost.spin_budget(0) == SPIN_MIN_S
    assert cost.spin_budget(mib) == pytest.approx(mib / SPIN_RATE_BPS)


def test_spin_budget_of_large_operations_outlasts_a_time_slice():
    """Above LARGE_BYTES a wait spins nbytes / SPIN_LARGE_RATE_BPS, capped at SPIN_LARGE_MAX_S,
    longer than the small-operation cap, and the same on an oversubscribed node."""
    cost = SleepCost(initial_s=1e-4, weight=1.0)
    four = 4 << 20
    assert cost.spin_budget(four) == pytest.approx(four / SPIN_LARGE_RATE_BPS)
    assert cost.spin_budget(four) > SPIN_BYTES_MAX_S
    assert cost.spin_budget(1 << 30) == SPIN_LARGE_MAX_S
    cost.value_s = 2 * SPIN_MAX_S
    assert cost.spin_budget(four) == pytest.approx(four / SPIN_LARGE_RATE_BPS)


def test_spin_yields_the_core_between_polls(monkeypatch):
    """Every pause of the spin calls sched_yield (as MPICH's waits do); sleeps do not."""
    yields, slept = [], []
    monkeypatch.setattr(waiting, "_yield", lambda: yields.append(1))
    monkeypatch.setattr(waiting.time, "sleep", slept.append)
    bo = TwoPhaseBackoff(first_s=1e-5, max_s=1e-5, cost=SleepCost(initial_s=SPIN_MIN_S),
                         nbytes=int(1e-3 * SPIN_RATE_BPS))
    t0 = time.perf_counter()
    while not slept:
        bo.pause()
    assert time.perf_counter() - t0 >= 1e-3 * 0.99      # the 1 ms the bytes take, not 50 us
    n = len(yields)
    assert n >= 1
    bo.pause()
    assert len(yields) == n                              # past the spin: sleeps only
    waiting.wait_mpi([_MPIReq(3)], cost=SleepCost(initial_s=SPIN_MIN_S))
    assert len(yields) == n + 1                          # one yield per failed poll of the loop


def test_spins_for_the_budget_then_sleeps_growing(monkeypatch):
    cost = SleepCost(initial_s=SPIN_MAX_S, weight=0.5)
    slept = []
    monkeypatch.setattr(waiting.time, "sleep", slept.append)
    bo = TwoPhaseBackoff(first_s=1e-5, max_s=4e-5, cost=cost)
    t0 = time.perf_counter()
    while not slept:
        bo.pause()
    assert time.perf_counter() - t0 >= SPIN_MAX_S    # spun for the estimated sleep cost
    for _ in range(3):
        bo.pause()
    assert slept == [1e-5, 2e-5, 4e-5, 4e-5]
    # the first sleep was measured and folded in (weight 0.5); no bound on what it measured: load lengthens it
    assert cost.value_s != SPIN_MAX_S and cost.value_s >= 0.5 * SPIN_MAX_S
    bo.reset()
    bo.pause()
    assert len(slept) == 4                            # spinning again after a reset


class _Req:
    """A pending request stand-in: completes at its ``done_at``-th test; a link-model-like
    bound ``not_before = now + bound`` and ``ready_at`` (None: receive without its header)."""

    def __init__(self, done_at, bound=None, ready_at=0.0):
        self.tests, self.done_at, self.bound, self.ready_at = 0, done_at, bound, ready_at

    def test(self):
        self.tests += 1
        return self.tests >= self.done_at

    def not_before(self, now):
        return None if self.bound is None else now + self.bound


def test_wait_inline_polls_every_request_and_wakes_half_way(monkeypatch):
    """A receive still missing its arrival header sleeps half its bound, and the step's
    send is polled on every pass (its own queued header must leave)."""
    from hpcbench.collectives import _core

    slept = []
    monkeypatch.setattr(_core.time, "sleep", slept.append)
    recv = _Req(done_at=3, bound=10.0, ready_at=None)
    send = _Req(done_at=3, bound=4.0)
    _core.wait_inline([recv, send], TwoPhaseBackoff(cost=SleepCost()))
    assert send.tests >= 2 and recv.tests >= 3
    assert slept and slept[0] == pytest.approx(4.0, abs=1e-3)   # the earlier of 10/2 and 4
    recv2 = _Req(done_at=2, bound=10.0, ready_at=None)
    _core.wait_inline([recv2], TwoPhaseBackoff(cost=SleepCost()))
    assert slept[-1] == pytest.approx(5.0, abs=1e-3)


class _MPIReq:
    """An mpi4py-request stand-in: ``Test()`` true from its ``done_at``-th call."""

    def __init__(self, done_at):
        self.tests, self.done_at = 0, done_at

    def Test(self):  # noqa: N802 - mpi4py's name
        self.tests += 1
        return self.tests >= self.done_at


def test_wait_mpi_spins_then_sleeps_and_restarts_per_request(monkeypatch):
    """wait_mpi: no sleep while requests complete within the spin budget; past it, sleeps
    that double from first_s (the first one timed into the estimate), and the schedule
    starts again for the next request."""
    slept = []
    monkeypatch.setattr(waiting.time, "sleep", slept.append)
    cost = SleepCost(initial_s=SPIN_MIN_S, weight=0.5)
    monkeypatch.setattr(waiting.time, "perf_counter", lambda: 0.0)   # the spin never runs out
    quick = [_MPIReq(1), _MPIReq(50)]
    waiting.wait_mpi(quick, cost=cost)
    assert slept == [] and [q.tests for q in quick] == [1, 50]
    clock = iter(range(10 ** 6))           # perf_counter: 1 s per call, so the spin ends at once
    monkeypatch.setattr(waiting.time, "perf_counter", lambda: float(next(clock)))
    slow = [_MPIReq(5), _MPIReq(4)]
    waiting.wait_mpi(slow, first_s=1e-5, max_s=2e-5, cost=cost)
    assert slept == [1e-5, 2e-5, 2e-5, 1e-5, 2e-5]
    assert cost.value_s != SPIN_MIN_S       # the first sleep of each request was measured

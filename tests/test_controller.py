"""StellaTrain's controller maths: estimator and fit on a telemetry fixture, batch solvers, rate search."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from hpcbench.controller import (BandwidthEstimator, BatchProblem, Controller, STELLATRAIN_TIMING,
                                 ThroughputHistory, ThroughputModel, WireModel, fit_throughput, objective,
                                 search_compression_rate, solve_batch_sizes)
from hpcbench.controller.rate import MAX_RATE, SEARCH_STEPS, modelled_step_s
from hpcbench.runtime.errors import InputError
from hpcbench.telemetry import TelemetryRecord

FIXTURE = Path(__file__).parent / "data" / "stellatrain_telemetry.json"


def fixture_steps() -> list[list[TelemetryRecord]]:
    recs = [TelemetryRecord(**r) for r in json.loads(FIXTURE.read_text())["records"]]
    return [[r for r in recs if r.step == s] for s in sorted({r.step for r in recs})]


def test_estimator_on_the_fixture_by_hand():
    """Each step's value worked out from the fixture's numbers (Mbit/s below)."""
    est = BandwidthEstimator()
    steps = fixture_steps()
    got = []
    for recs in steps:
        est.observe(recs)
        got.append(est.estimate())
    # step 0: smoothed = readings (100, 80); the first estimate is the measured minimum
    assert got[0].measured_bps == 80e6 and got[0].estimate_bps == 80e6
    # step 1: smoothed 0.1*100 + 0.9*50 = 55, 0.1*80 + 0.9*90 = 89; rank 1 does not wait: r = 0, probe up
    assert got[1].measured_bps == pytest.approx(55e6)
    assert got[1].wait_s == 0.0 and got[1].reduce_fraction == 0.0 and got[1].probing
    assert got[1].estimate_bps == pytest.approx((0.9 * 80 + 0.1 * 55) * 1.1 * 1e6)          # 85.25
    # step 2: smoothed 0.1*55 + 0.9*60 = 59.5, 0.1*89 + 0.9*70 = 71.9; wait min(0.15, 0.1) = 0.1,
    # compute mean(1.5*0.2, 1.5*0.4) = 0.45, r = 0.1 / 0.55
    assert got[2].measured_bps == pytest.approx(59.5e6)
    assert got[2].wait_s == pytest.approx(0.1) and got[2].compute_s == pytest.approx(0.45)
    assert got[2].reduce_fraction == pytest.approx(0.1 / 0.55)
    e2 = (0.9 * 85.25 + 0.1 * 59.5) * (1 - 0.1 / 0.55)
    assert got[2].estimate_bps == pytest.approx(e2 * 1e6)                                     # 67.643
    # step 3: smoothed 41.95, 43.19; wait 1.0, r = 1/1.45 = 0.69: the cut is floored at 0.75
    assert got[3].reduce_fraction == pytest.approx(1 / 1.45)
    e3 = (0.9 * e2 + 0.1 * 41.95) * 0.75
    assert got[3].estimate_bps == pytest.approx(e3 * 1e6)                                     # 48.805
    # step 4: wait 0.01, r = 0.01 / 0.46 < 0.05 counts as 0: probe up again
    assert got[4].reduce_fraction == 0.0
    assert got[4].estimate_bps == pytest.approx((0.9 * e3 + 0.1 * 40.195) * 1.1 * 1e6)        # 52.739


def test_estimator_ignores_workers_that_measured_nothing_and_reads_the_mean():
    est = BandwidthEstimator(reading="mean")
    recs = fixture_steps()[0]
    silent = TelemetryRecord(**{**recs[1].row(), "rank": 2, "recv_peak_bps": 0.0, "recv_mean_bps": 0.0})
    est.observe([*recs, silent])
    assert est.estimate().measured_bps == 40e6        # the means (50, 40); rank 2's 0 is left out
    with pytest.raises(RuntimeError, match="no telemetry"):
        BandwidthEstimator().estimate()
    with pytest.raises(ValueError, match="reading"):
        BandwidthEstimator(reading="max")


def test_throughput_fit_recovers_the_model():
    """Points of alpha 32, beta 400: f(8) = 100, f(16) = 200, f(32) = f(64) = 400 samples/s."""
    truth = ThroughputModel(32.0, 400.0)
    assert truth.rate([8, 16, 32, 64]).tolist() == [100.0, 200.0, 400.0, 400.0]
    assert truth.time(64) == pytest.approx(0.16) and truth.time(8) == pytest.approx(0.08)
    hist = ThroughputHistory()
    for x in (8, 16, 32, 64):
        hist.add(x, float(truth.time(x)))
    fit = fit_throughput(*hist.points())
    assert fit.alpha == pytest.approx(32, rel=1e-3) and fit.beta == pytest.approx(400, rel=1e-3)


def test_throughput_fit_respects_the_bounds_and_the_history_smooths():
    fit = fit_throughput([4, 8], [20.0, 40.0])             # a slow device: alpha would be below 16
    assert fit.alpha >= 16 and fit.beta >= 100
    h = ThroughputHistory(momentum=0.9)
    h.add(10, 0.1)
    h.add(10, 0.05)                                         # 100 then 200 samples/s
    assert h.points()[1].tolist() == [pytest.approx(0.9 * 100 + 0.1 * 200)] and h.samples == 2 and len(h) == 1
    with pytest.raises(ValueError, match="non-empty"):
        fit_throughput([], [])


def test_objective_and_exact_solver_by_hand():
    """alpha 32 for both, beta 400 and 200: (64, 32) takes 0.16 s on both, CV 0, J = 0.16 / 96."""
    models = [ThroughputModel(32, 400), ThroughputModel(32, 200)]
    p = BatchProblem.of(models, 1, 64)
    # (32, 32): times 0.08, 0.16; 0.16 / 64 + 5 * (0.04 / 0.12)
    assert objective(p, [32, 32]) == pytest.approx(0.16 / 64 + 5 * 0.04 / 0.12)
    assert objective(p, [31.6, 32.2]) == objective(p, [32, 32])          # rounded first
    best = solve_batch_sizes(p, "exact")
    assert best.batch == (64, 32) and best.objective == pytest.approx(0.16 / 96)
    nm = solve_batch_sizes(p, "nelder-mead", seed=1, restarts=4)
    assert nm.objective >= best.objective


@settings(max_examples=60, deadline=None)
@given(n=st.integers(1, 5), seed=st.integers(0, 2 ** 16), integral=st.booleans())
def test_exact_never_worse_than_nelder_mead(n, seed, integral):
    rng = np.random.default_rng(seed)
    alpha, beta = rng.uniform(16, 128, n), rng.uniform(100, 1000, n)
    if integral:
        alpha, beta = np.round(alpha), np.round(beta)
    lo = rng.integers(1, 8, n)
    hi = lo + rng.integers(0, 100, n)
    p = BatchProblem.of([ThroughputModel(a, b) for a, b in zip(alpha, beta)], lo, hi)
    exact = solve_batch_sizes(p, "exact")
    nm = solve_batch_sizes(p, "nelder-mead", seed=seed, restarts=3)
    assert exact.objective <= nm.objective + 1e-12
    assert all(l <= x <= h for l, x, h in zip(lo, exact.batch, hi))
    assert exact.objective == pytest.approx(objective(p, exact.batch))


def test_batch_problem_and_solver_errors():
    with pytest.raises(InputError, match="lower <= upper"):
        BatchProblem.of([ThroughputModel(16, 100)], 8, 4)
    with pytest.raises(InputError, match="registered: nelder-mead, exact"):
        solve_batch_sizes(BatchProblem.of([ThroughputModel(16, 100)], 1, 4), "anneal")


def test_wire_bytes_by_hand():
    w = WireModel((1000,))
    # c = 0.9 keeps 100 pairs: 47 + 100 * 8 = 847 B, one segment of 66 B headers
    assert w.message_bytes(0.9) == 847 + 66
    # c = 0 keeps 1000: 8047 B, MSS 1538 - 66 = 1472, ceil(8047 / 1472) = 6 segments
    assert w.message_bytes(0.0) == 8047 + 6 * 66
    assert w.kept(0.9999).tolist() == [1]                              # at least one pair
    small = WireModel((1000, 100_000), value_bytes=2, small_index_bytes=2)
    assert small.message_bytes(0.5) == (47 + 500 * 4 + 2 * 66) + (47 + 50_000 * 6 + 204 * 66)
    assert w.required_bps(0.9, 0.5) == pytest.approx(913 * 8 / 0.5)


@settings(max_examples=60, deadline=None)
@given(counts=st.lists(st.integers(1, 5_000_000), min_size=1, max_size=6), bw=st.floats(1e5, 1e10),
       step_s=st.floats(0.01, 2.0), nodes=st.integers(1, 8))
def test_rate_search_result_fits_and_is_the_smallest_that_does(counts, bw, step_s, nodes):
    w = WireModel(tuple(counts))
    d = search_compression_rate(w, bw, step_s, nodes)
    fits = lambda c: w.required_bps(c, step_s) <= bw           # noqa: E731
    if not fits(MAX_RATE):
        assert d.search_rate == MAX_RATE and not d.fits
    else:
        assert d.fits and fits(d.search_rate)
        if d.search_rate > 0:
            assert not fits(d.lower_rate)
            assert d.search_rate - d.lower_rate == pytest.approx(MAX_RATE / 2 ** SEARCH_STEPS)
    expected = 0.0 if nodes == 1 else 1 - (1 - d.search_rate) / (nodes - 1)
    assert d.compression_rate == pytest.approx(expected) and d.ratio == pytest.approx(1 - expected)


def test_rate_search_edges():
    w = WireModel((1_000_000,))
    assert search_compression_rate(w, 1e12, 1.0, 4).search_rate == 0.0          # everything fits
    d = search_compression_rate(w, 1e3, 1.0, 2)                                   # nothing does
    assert d.search_rate == MAX_RATE and not d.fits
    # four nodes: 1 - (1 - c) / 3
    d = search_compression_rate(w, 8e6 * 0.3 * 8.0 / 8, 1.0, 4)
    assert d.compression_rate == pytest.approx(1 - (1 - d.search_rate) / 3)
    with pytest.raises(ValueError, match="step_s"):
        search_compression_rate(w, 1e6, 0.0, 2)
    assert modelled_step_s([ThroughputModel(32, 400), ThroughputModel(32, 200)], [64, 32]) == pytest.approx(
        1.5 * 0.16)


def _run(controller, bwd, steps, recv_bps, gap_s=0.0):
    """Feed ``steps`` steps of two ranks whose backward takes ``bwd[i](batch)``; the decisions taken."""
    out = []
    for s in range(steps):
        batch = controller.batch
        recs = [TelemetryRecord(s, i, 0.0, bwd[i](batch[i]) / 2, bwd[i](batch[i]), gap_s, 0.0, recv_bps, recv_bps,
                                recv_bps, recv_bps, int(batch[i]), 1, 1 - controller.rate) for i in range(2)]
        d = controller.observe(recs)
        if d is not None:
            out.append(d)
    return out


def test_controller_phases_and_timing():
    """Warm-up (4 records skipped, 4 samples), growth x1.5 to the bounds, then running decisions."""
    models = [ThroughputModel(32, 400), ThroughputModel(32, 200)]     # 2:1 devices
    bwd = [lambda x, m=m: float(m.time(x)) for m in models]
    c = Controller(WireModel((25_000_000,)), upper=[64, 64], initial_batch=[16, 16], initial_rate=0.99)
    decisions = _run(c, bwd, 40, 100e6)
    t = STELLATRAIN_TIMING
    phases = [d.phase for d in decisions]
    assert phases[:4] == ["collect"] * 4 and phases[4] == "running"
    assert [d.batches for d in decisions[:4]] == [(24, 24), (36, 36), (54, 54), (64, 64)]
    # the first decision: warm-up ends after 4 + 4 records (step 7), due as 7 >= 0 + 4; effective at 7 + 3
    assert decisions[0].step == 7 and decisions[0].effective_step == 7 + t.effective_after
    for a, b in zip(decisions, decisions[1:]):
        wait = t.wait_steps_running if a.phase == "running" else t.wait_steps
        assert b.step == a.effective_step + wait         # decided at the first step it was due
        assert b.effective_step == b.step + t.effective_after
    running = [d for d in decisions if d.phase == "running"]
    assert running[0].reoptimised and not any(d.reoptimised for d in running[1:])
    # the fits found the 2:1 devices: the slow one gets half the batch
    assert running[0].batches == (64, 32)
    assert c.models[0].beta == pytest.approx(400, rel=0.02) and c.models[1].beta == pytest.approx(200, rel=0.02)
    step_s = modelled_step_s(c.models, [64, 32])
    fit = search_compression_rate(c.wire, running[-1].estimate_bps, step_s, 2)
    assert running[-1].compression_rate == pytest.approx(fit.compression_rate)
    assert running[-1].compression_rate > 0.9        # 25M parameters at ~100 Mbit/s in ~0.24 s


def test_controller_rejects_unknown_ranks():
    c = Controller(WireModel((10,)), upper=[8], initial_batch=[4], initial_rate=0.0)
    with pytest.raises(ValueError, match="rank 3"):
        c.observe([TelemetryRecord(0, 3, 0, 0.1, 0.1, 0, 0, 1, 1, 1, 1, 4, 1, 1.0)])
    assert math.isnan(c.estimator.estimate_bps if c.estimator.estimate_bps is not None else float("nan"))

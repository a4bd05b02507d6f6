"""Time-varying WAN bandwidth (MobiPerf scaled to a mean) through the link model; shared per-rank speed factors."""

from __future__ import annotations

import numpy as np
import pytest
from mpi4py import MPI

from hpcbench.collectives.linkmodel import STELLATRAIN_WAN_MEANS_BPS, BandwidthReplay, LinkTransport
from hpcbench.runtime.dilation import TimeDilation
from hpcbench.runtime.errors import InputError
from hpcbench.traces import load_mobiperf
from hpcbench.traces.speed import speed_factors


@pytest.mark.parametrize("mean", STELLATRAIN_WAN_MEANS_BPS)
def test_mobiperf_wan_has_the_chosen_mean_and_the_trace_shape(mean):
    rep = BandwidthReplay.mobiperf_wan(mean, interval_s=0.5)
    trace = load_mobiperf()
    tests = trace.mean_kbps(np.arange(len(trace)))
    assert rep.bits_per_s.size == len(trace) and rep.interval_s == 0.5
    assert rep.mean_bps == pytest.approx(mean)
    np.testing.assert_allclose(rep.bits_per_s / rep.bits_per_s[0], tests / tests[0])    # same fluctuation
    # one period moves mean x period bits: the link model's average rate is the mean
    assert rep.transfer_time(mean * rep.period_s, 0.0) == pytest.approx(rep.period_s)
    assert rep.rate_at(0.25) == pytest.approx(tests[0] * 1e3 * mean / (tests.mean() * 1e3))


def test_link_transport_replays_the_scaled_trace():
    """A message's modelled time follows the trace's level at its departure (and dilation stretches it)."""
    rep = BandwidthReplay([50e6, 150e6], interval_s=1.0).scaled_to_mean(100e6)
    assert rep.bits_per_s.tolist() == [50e6, 150e6]
    tr = LinkTransport(MPI.COMM_SELF, trace=rep, dilation=TimeDilation(4.0))
    try:
        # 1 MB leaving at trace time 0: 8e6 bits at 50 Mbit/s = 0.16 s; at trace time 1 (wall t0 + 4 s): at 150
        assert tr.transfer_time(1_000_000, tr.t0) == pytest.approx(0.16)
        assert tr.transfer_time(1_000_000, tr.t0 + 4.0) == pytest.approx(8e6 / 150e6)
        # 12.5 MB from trace time 0.5: 25 Mbit in the first half second, the remaining 75 Mbit at 150
        assert tr.transfer_time(12_500_000, tr.t0 + 2.0) == pytest.approx(0.5 + 75e6 / 150e6)
    finally:
        tr.free()
    with pytest.raises(ValueError, match="mean_bps"):
        rep.scaled_to_mean(0.0)


def test_speed_factors_are_the_pipeline_runners():
    from hpcbench.pipeline import devices

    assert devices.speed_factors is speed_factors                  # one piece of code, not a copy
    assert speed_factors("2:1", 5, 0).tolist() == [1.0, 2.0, 1.0, 2.0, 1.0]
    assert speed_factors([1.0, 1.5, 3.0], 4, 0).tolist() == [1.0, 1.5, 3.0, 1.0]
    drawn = speed_factors("trace", 6, seed=3)
    assert drawn.min() == 1.0 and np.array_equal(drawn, speed_factors("trace", 6, seed=3))
    with pytest.raises(InputError, match="workers.speed: expected a list"):
        speed_factors("fast", 2, 0, key="workers.speed")
    with pytest.raises(InputError, match="positive"):
        speed_factors([1.0, -2.0], 2, 0)


def test_transfer_time_ends_when_rounding_puts_t_at_a_segment_end():
    """0.5 // 0.1 is 4.0 (0.5 / 0.1 rounds below 5): the segment then ended at t itself and the loop made no
    progress for ever (a bucket's wait hung in the training runner at 3-4 ranks)."""
    rep = BandwidthReplay([8.0] * 10, interval_s=0.1)
    assert 0.5 // 0.1 == 4.0
    assert abs(rep.transfer_time(4.0, 0.5) - 0.5) < 1e-9         # 8 bit/s everywhere: 4 bits take 0.5 s
    rep3 = BandwidthReplay([8.0, 16.0, 24.0, 32.0], interval_s=0.3)
    t = 3 * 0.3                                                   # 0.8999999999999999 // 0.3 == 2.0
    assert abs(rep3.transfer_time(16.0, t) - 0.85) < 1e-9  # 0.3 s at 32 (9.6 bits), 0.3 s at 8 (2.4), 0.25 s at 16 (4)

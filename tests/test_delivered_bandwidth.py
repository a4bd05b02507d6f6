"""The delivered-bandwidth meter and estimator on a modelled link of known bandwidth and latency."""

from __future__ import annotations

import time

import numpy as np
import pytest
from mpi4py import MPI

from hpcbench.collectives.linkmodel import BandwidthReplay, LinkTransport
from hpcbench.controller import ESTIMATORS, DeliveredBandwidthEstimator
from hpcbench.runtime.dilation import TimeDilation
from hpcbench.telemetry import DeliveryMeter, TelemetryRecord, TrafficMeters


def _exchange(lt: LinkTransport, sizes, gap_s: float) -> None:
    """Send each message to this rank itself over the link and wait for it, idle ``gap_s`` between them."""
    for i, n in enumerate(sizes):
        out, into = np.ones(n, dtype=np.uint8), np.empty(n, dtype=np.uint8)
        r = lt.irecv(into, 0, 7 + i)
        s = lt.isend(out, 0, 7 + i)
        s.wait()
        r.wait()
        time.sleep(gap_s)


def test_link_of_known_rate_and_latency_is_read_at_its_rate_where_the_100ms_bins_read_far_below():
    """20 Mbit/s, 15 ms latency, 5-40 KB messages with idle gaps: the pooled busy-time rate is the link's
    (latency left out: counting it would read 2-10x low); StellaTrain's busiest 100 ms bin reads below half."""
    dil = TimeDilation(2.0)
    lt = LinkTransport(MPI.COMM_SELF, alpha=0.015, beta="20Mbit", dilation=dil)
    meters = TrafficMeters(dil)
    lt.meter = meters
    try:
        _exchange(lt, [5_000, 40_000, 12_000, 25_000], gap_s=0.03)
        now = dil.now()
        delivered = meters.delivered_bps()
        assert delivered == pytest.approx(20e6, rel=0.02)
        assert meters.recv.peak_bps(now) < 0.5 * 20e6
        assert np.isnan(meters.delivered_bps())                 # taken: nothing arrived since
    finally:
        lt.free()


def test_each_step_reads_the_level_its_transfers_met():
    """A replay of 10 then 30 Mbit/s (0.5 modelled s each): a step's reading follows the level."""
    rep = BandwidthReplay([10e6, 30e6], interval_s=0.5)
    lt = LinkTransport(MPI.COMM_SELF, alpha=0.002, trace=rep)
    meters = TrafficMeters(TimeDilation(1.0))
    lt.meter = meters
    try:
        _exchange(lt, [10_000, 20_000], gap_s=0.0)              # 24 ms at 10 Mbit/s, well inside level 0
        first = meters.delivered_bps()
        time.sleep(max(0.0, lt.t0 + 0.55 - time.monotonic()))
        _exchange(lt, [10_000, 20_000], gap_s=0.0)
        second = meters.delivered_bps()
    finally:
        lt.free()
    assert first == pytest.approx(10e6, rel=0.02) and second == pytest.approx(30e6, rel=0.02)


def test_delivery_meter_pools_bytes_over_busy_seconds_by_hand():
    m = DeliveryMeter()
    m.record(1000, 0.0, 0.001)            # 8 Mbit/s
    m.record(3000, 5.0, 5.001)            # 24 Mbit/s, long after: idle time does not count
    m.record(500, 6.0, 6.0)               # no duration: bytes counted, rate not
    assert m.take() == pytest.approx(4000 * 8 / 0.002) and m.total_bytes == 4500
    assert np.isnan(m.take())


def _rec(rank, step, busy):
    return TelemetryRecord(step, rank, 0.0, 0.1, 0.2, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 16, 1, 0.01, recv_busy_bps=busy)


def test_estimator_median_per_worker_minimum_over_workers_skips_empty_steps():
    est = DeliveredBandwidthEstimator(window=3)
    with pytest.raises(RuntimeError, match="no telemetry"):
        est.estimate()
    est.observe([_rec(0, 0, float("nan")), _rec(1, 0, 0.0)])
    assert est.estimate().estimate_bps == 0.0                     # nothing measured yet
    for step, (a, b) in enumerate([(100e6, 90e6), (20e6, 95e6), (110e6, float("nan")), (105e6, 80e6)], 1):
        est.observe([_rec(0, step, a), _rec(1, step, b)])
    e = est.estimate()
    # rank 0's last 3: 20, 110, 105 -> median 105; rank 1's: 90, 95, 80 (NaN skipped) -> 90; min 90
    assert e.measured_bps == pytest.approx(90e6) and e.estimate_bps == pytest.approx(90e6)
    assert np.isnan(e.reduce_fraction) and not e.probing
    est.observe([_rec(0, 5, float("nan")), _rec(1, 5, float("nan"))])
    assert est.estimate().estimate_bps == pytest.approx(90e6)     # no new reading: unchanged
    assert set(ESTIMATORS) == {"delivered", "stellatrain"} and ESTIMATORS["delivered"] is DeliveredBandwidthEstimator
    with pytest.raises(ValueError, match="window"):
        DeliveredBandwidthEstimator(window=0)


def test_messages_inside_a_host_count_bytes_but_no_link_rate_between_hosts():
    """``scope="between_hosts"`` on one host: every message stays inside it (shared memory, not modelled); the
    meters count its bytes but the delivered rate has none to read (NaN), even when the receive waited, so the
    estimate planned with is the link between hosts alone. With ``scope="all"`` the same exchange reads the
    modelled rate."""
    for scope, want in (("between_hosts", None), ("all", 20e6)):
        lt = LinkTransport(MPI.COMM_SELF, alpha=0.0, beta="20Mbit", scope=scope)
        meters = TrafficMeters(TimeDilation(1.0))
        lt.meter = meters
        try:
            out, into = np.ones(40_000, dtype=np.uint8), np.empty(40_000, dtype=np.uint8)
            r = lt.irecv(into, 0, 3)
            time.sleep(0.02)                    # the receive waits for its sender
            lt.isend(out, 0, 3).wait()
            r.wait()
        finally:
            lt.free()
        assert meters.delivered.total_bytes == 40_000
        assert lt.link_bytes_sent == (0 if want is None else 40_000) and lt.bytes_sent == 40_000
        got = meters.delivered_bps()
        assert np.isnan(got) if want is None else got == pytest.approx(want, rel=0.02)
        assert lt.ranks_per_host == ((1,) if scope == "between_hosts" else ())

"""Telemetry records, the bandwidth meter, and their HDF5 tables (units from the record types)."""

from __future__ import annotations

import pytest

from hpcbench.controller import Decision
from hpcbench.results import ResultsFile, read_table
from hpcbench.results.records import columns_of, rows_of
from hpcbench.telemetry import BandwidthMeter, TelemetryRecord


def record(step=3, rank=1):
    return TelemetryRecord(step, rank, 1.25, 0.1, 0.2, 0.05, 0.01, 8e6, 4e6, 9e6, 3e6, 32, 2, 0.01, 7e6)


def test_meter_busiest_bin_and_mean_by_hand():
    """1000 B at 0.05 s and 3000 B at 0.55 s, read at 0.6 s: bins of 100 ms back from the query."""
    m = BandwidthMeter(clock=lambda: 0.6)
    m.record(1000, 0.05)
    m.record(3000, 0.55)
    assert m.peak_bps() == pytest.approx(3000 * 8 / 0.1)         # bin 0 holds 3000 B
    assert m.mean_bps() == pytest.approx(4000 * 8 / 1.0)
    # at 1.1 s the first transfer is 1.05 s old: out of the 1 s window
    assert m.mean_bps(now=1.1) == pytest.approx(3000 * 8)
    assert m.peak_bps(now=2.0) == 0.0 and m.total_bytes == 4000


def test_meter_spreads_a_transfer_over_its_time():
    m = BandwidthMeter()
    m.record_span(1e6, 0.0, 0.5)                                  # 16 Mbit/s for half a second
    assert m.peak_bps(now=0.5) == pytest.approx(16e6, rel=0.05)
    assert m.mean_bps(now=0.5) == pytest.approx(8e6)
    m.record_span(100, 0.7, 0.7)
    assert m.total_bytes == pytest.approx(1e6 + 100)
    with pytest.raises(ValueError, match="bin_s"):
        BandwidthMeter(window_s=0.1, bin_s=0.2)


def test_record_vector_round_trip_and_columns():
    r = record()
    assert TelemetryRecord.from_vector(r.vector()) == r
    cols = {c.name: c for c in columns_of(TelemetryRecord)}
    assert list(cols) == list(TelemetryRecord.names())
    assert cols["recv_peak_bps"].units == "bit/s" and cols["backward_s"].units == "s"
    assert cols["micro_batch"].dtype == "int64" and cols["ratio"].dtype == "float64"
    assert all(c.description for c in cols.values())


def test_tables_written_and_read_back(tmp_path):
    path = tmp_path / "t.h5"
    d = Decision(10, 13, "running", 9e7, 8e7, 0.2, 0.99, 0.01, "64,32", 0.0017, True)
    with ResultsFile(path, "train", {}) as f:
        f.table("telemetry", columns_of(TelemetryRecord)).append(rows_of([record(0, 0), record(0, 1)]))
        f.table("controller", columns_of(Decision)).append(rows_of([d]))
    t = read_table(path, "telemetry")
    assert t["rank"].tolist() == [0, 1] and t["recv_mean_bps"].tolist() == [3e6, 3e6]
    dec = read_table(path, "controller")
    assert dec["batch_sizes"].tolist() == ["64,32"] and dec["reoptimised"].tolist() == [True]
    assert d.batches == (64, 32)
    import h5py
    with h5py.File(path) as h5:
        assert h5["telemetry/bwd_fwd_gap_s"].attrs["units"] == "s"
    assert rows_of([]) == {}
    with pytest.raises(TypeError, match="not a dataclass"):
        columns_of(int)


def test_traffic_meters_take_wall_spans_in_modelled_time_and_telemetry_gives_records():
    """A 1 MB receive over 0.5 wall seconds under dilation 2 is 0.25 modelled seconds: 32 Mbit/s at its peak;
    a step's Telemetry carrying two ranks' records (after the step's own fields) gives them back."""
    import numpy as np

    from hpcbench.policies import Telemetry
    from hpcbench.runtime.dilation import TimeDilation
    from hpcbench.telemetry import TrafficMeters
    from hpcbench.train.reporting.tables import STEP_FIELDS

    m = TrafficMeters(TimeDilation(2.0))
    m.received(1e6, 10.0, 10.5)
    m.sent(5e5, 10.0, 10.0)
    send_peak, send_mean, recv_peak, recv_mean = m.readings(5.25)
    assert recv_peak == pytest.approx(32e6, rel=0.05) and recv_mean == pytest.approx(8e6)
    assert send_peak == pytest.approx(4e6 * 10) and send_mean == pytest.approx(4e6)
    fields = STEP_FIELDS + TelemetryRecord.names()
    rows = np.array([np.concatenate([np.arange(len(STEP_FIELDS)), record(3, r).vector()]) for r in (0, 1)])
    tel = Telemetry(3, 0, fields, rows[0], rows, {}, (32, 32))
    assert tel.records() == [record(3, 0), record(3, 1)]
    assert Telemetry(3, 0, fields, rows[1], None, {}, (32, 32)).records() == [record(3, 1)]
    assert Telemetry(3, 0, STEP_FIELDS, rows[0, :7], None, {}, (32, 32)).records() == []


def test_bandwidth_replay_mean_rate_integrates_the_levels():
    from hpcbench.collectives.linkmodel import BandwidthReplay

    r = BandwidthReplay([10.0, 30.0, 20.0], interval_s=0.5)
    assert r.mean_rate(0.25, 0.75) == pytest.approx(20.0)          # half of each of the first two levels
    assert r.mean_rate(0.0, 1.5) == pytest.approx(20.0) and r.mean_rate(0.6, 0.6) == 30.0
    assert r.mean_rate(1.25, 1.75) == pytest.approx(15.0)          # wraps around: 20 then 10

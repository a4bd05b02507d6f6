"""Tests for hpcbench.traces (real device traces, FedScale pickles)."""

from __future__ import annotations

import gzip
import json
import os
import pickle

import numpy as np
import pytest

from hpcbench.data import data_path
from hpcbench import traces as T
from hpcbench.traces import TraceError


# ----------------------------------------------------------------- bundled data
def test_bundled_files_present():
    for name in (T.DEVICE_LATENCY_FILE, T.MOBIPERF_FILE, T.SPEED_DISTRIBUTION_FILE, T.FLASH_FILE):
        assert data_path("traces", name).is_file()
    assert data_path("ATTRIBUTION.md").is_file()
    with gzip.open(data_path("shakespeare", "tinyshakespeare.txt.gz"), "rb") as fh:
        text = fh.read()
    assert len(text) == 1_115_394
    assert text.startswith(b"First Citizen:")


def test_data_path_refuses_escape():
    with pytest.raises(ValueError):
        data_path("..", "cli.py")


def test_bundled_device_latency():
    d = T.load_device_latency()
    assert len(d) + d.n_excluded == 997
    assert d.n_excluded == 19  # records with a 0.0 ResNet latency
    assert len(d) == 978
    assert d.unit == "step"
    assert d.latency_ms.dtype == np.float64 and d.std_ms.dtype == np.float64
    assert np.all(d.latency_ms > 0) and np.all(d.std_ms >= 0)
    assert 10 <= d.latency_ms.min() and d.latency_ms.max() <= 60_000  # ms
    assert d.latency_ms.max() / d.latency_ms.min() > 100  # > two orders of magnitude
    v = T.load_device_latency(column="ViT")
    assert len(v) == 21 and v.n_excluded == 976
    with pytest.raises(ValueError):
        T.load_device_latency(column="vgg")


def test_bundled_mobiperf():
    m = T.load_mobiperf()
    assert len(m) == 200 and m.n_excluded == 0
    assert m.offsets.dtype == np.int64 and m.offsets[0] == 0 and m.offsets[-1] == len(m.kbps)
    assert np.all(np.diff(m.offsets) >= 1)
    assert 100 < m.kbps.min() and m.kbps.max() < 1e6  # kbit/s
    assert set(m.network_type.tolist()) == {"WIFI"}


def test_bundled_speed_distribution():
    s = T.load_speed_distribution()
    assert len(s) == 19
    for arr in (s.down_mean_kbps, s.up_mean_kbps):
        assert np.all(arr > 100) and np.all(arr < 1e6)
    assert np.all(s.down_sigma_kbps >= 0) and np.all(s.up_sigma_kbps >= 0)


def test_bundled_flash():
    a = T.load_flash()
    assert len(a) == 710 and a.n_excluded == 290
    assert np.all(a.duration_s >= 86_400 - 1)
    assert np.all(a.starts >= 0) and np.all(a.ends <= np.repeat(a.duration_s, np.diff(a.offsets)))
    assert np.all(a.ends >= a.starts)
    frac = a.availability_fraction()
    assert np.all((frac >= 0) & (frac <= 1))
    assert 0.01 < frac.mean() < 0.5
    # large vectorised query is fast and consistent
    rng = np.random.default_rng(1)
    rows = rng.integers(0, len(a), 200_000)
    t = rng.uniform(0, 3e7, rows.size)
    avail = a.is_available(rows, t)
    nxt = a.next_available_s(rows, t)
    assert np.all(nxt[avail] == t[avail])
    assert np.all(nxt >= t)
    assert np.all(a.is_available(rows, nxt))


def test_registry():
    assert set(T.TRACE_LOADERS) == {
        "flhetbench-device", "mobiperf", "speed-distribution", "flash",
        "fedscale-capacity", "fedscale-behavior", "none",
    }
    assert len(T.load_trace("mobiperf")) == 200
    assert len(T.load_trace("flhetbench-device", column="ViT")) == 21
    assert T.load_trace("none").is_available([0], [123.4]).all()
    with pytest.raises(ValueError):
        T.load_trace("nope")
    with pytest.raises(ValueError):
        T.load_trace("fedscale-capacity")


# ------------------------------------------------------- availability semantics
@pytest.fixture
def small_trace():
    # trace 0: duration 100, available [10, 20] and [50, 60]
    # trace 1: duration 10, available [0, 2] and [8, 10]
    # trace 2: duration 5, never available
    # trace 3: duration 50, overlapping input intervals merge to [5, 30]
    return T.AvailabilityTrace.from_intervals(
        [np.array([[50, 60], [10, 20]]), np.array([[0, 2], [8, 10]]),
         np.zeros((0, 2)), np.array([[5, 20], [10, 30], [12, 14]])],
        duration_s=[100.0, 10.0, 5.0, 50.0],
    )


def test_from_intervals_sorts_and_merges(small_trace):
    a = small_trace
    assert a.offsets.tolist() == [0, 2, 4, 4, 5]
    assert a.starts.tolist() == [10, 50, 0, 8, 5]
    assert a.ends.tolist() == [20, 60, 2, 10, 30]
    np.testing.assert_allclose(a.availability_fraction(), [0.2, 0.4, 0.0, 0.5])


def test_is_available_inside_outside_and_wrap(small_trace):
    a = small_trace
    rows = np.zeros(9, dtype=np.int64)
    t = np.array([5, 10, 15, 20, 21, 55, 99, 115, 260])  # 115 -> 15, 260 -> 60
    assert a.is_available(rows, t).tolist() == [False, True, True, True, False, True,
                                                 False, True, True]
    assert a.is_available([1, 1, 1, 1], [1.0, 5.0, 9.0, 10.0]).tolist() == [True, False, True, True]
    assert not a.is_available([2, 2], [0.0, 3.0]).any()
    assert a.is_available([3, 3, 3], [4.0, 13.0, 31.0]).tolist() == [False, True, False]
    # broadcasting a scalar time over rows, negative time wraps too
    assert a.is_available([0, 1, 2, 3], 15.0).tolist() == [True, False, False, True]
    assert a.is_available([0], -85.0).tolist() == [True]  # -85 mod 100 = 15


def test_next_available(small_trace):
    a = small_trace
    got = a.next_available_s([0, 0, 0, 0, 1, 1, 2, 3], [15.0, 30.0, 70.0, 170.0, 5.0, 13.0, 1.0, 40.0])
    assert got.tolist() == [15.0, 50.0, 110.0, 210.0, 8.0, 18.0, np.inf, 55.0]
    # result is available, and nothing earlier is
    t = np.linspace(0, 400, 4001)
    rows = np.zeros_like(t, dtype=np.int64)
    nxt = a.next_available_s(rows, t)
    assert a.is_available(rows, nxt).all()
    grid = np.arange(0, 500, 0.1)
    avail_grid = a.is_available(np.zeros_like(grid, dtype=np.int64), grid)
    for ti, ni in zip(t[::97], nxt[::97]):
        between = (grid >= ti) & (grid < ni - 1e-9)
        assert not avail_grid[between].any()


def test_always_available():
    a = T.always_available(3)
    assert len(a) == 3
    rows = np.array([0, 1, 2, 1])
    t = np.array([0.0, 0.5, 1e9 + 0.3, 7.0])
    assert a.is_available(rows, t).all()
    assert np.array_equal(a.next_available_s(rows, t), t)


def test_row_bounds(small_trace):
    with pytest.raises(IndexError):
        small_trace.is_available([4], 0.0)
    with pytest.raises(TypeError):
        small_trace.is_available([0.5], 0.0)


# ------------------------------------------------------------------- sampling
def test_sampling_deterministic_and_sane():
    d = T.load_device_latency()
    m = T.load_mobiperf()
    s = T.load_speed_distribution()
    rows_d = np.arange(len(d)).repeat(20)
    a1 = d.sample_latency_s(rows_d, np.random.default_rng(7))
    a2 = d.sample_latency_s(rows_d, np.random.default_rng(7))
    assert np.array_equal(a1, a2)
    assert np.all(a1 >= 0.1 * d.latency_ms[rows_d] / 1000 - 1e-15)
    np.testing.assert_allclose(d.mean_latency_s([0]), d.latency_ms[:1] / 1000)

    rows_m = np.arange(len(m)).repeat(50)
    b1 = m.sample_kbps(rows_m, np.random.default_rng(3))
    assert np.array_equal(b1, m.sample_kbps(rows_m, np.random.default_rng(3)))
    for r in (0, 57, 199):  # each draw is one of the test's own samples
        own = m.kbps[m.offsets[r]:m.offsets[r + 1]]
        assert np.isin(b1[rows_m == r], own).all()
    assert len(np.unique(b1[rows_m == 0])) > 1

    rows_s = np.arange(len(s)).repeat(2000)
    for direction, mean in (("down", s.down_mean_kbps), ("up", s.up_mean_kbps)):
        c1 = s.sample_kbps(rows_s, np.random.default_rng(5), direction=direction)
        assert np.array_equal(c1, s.sample_kbps(rows_s, np.random.default_rng(5), direction=direction))
        assert np.all(c1 >= 0.01 * mean[rows_s])
    with pytest.raises(ValueError):
        s.sample_kbps([0], np.random.default_rng(0), direction="sideways")


# ------------------------------------------------------------------ TraceError
def _write(tmp_path, name, obj):
    p = tmp_path / name
    p.write_text(obj if isinstance(obj, str) else json.dumps(obj))
    return p


def _dev(**over):
    rec = {"Phone Model": "P1", "ResNet Latency": 50.0, "ResNet STD": 1.0}
    rec.update(over)
    return rec


def test_error_missing_file(tmp_path):
    p = tmp_path / "nope.json"
    with pytest.raises(TraceError, match="nope.json.*does not exist"):
        T.load_device_latency(p)


def test_error_malformed_json(tmp_path):
    p = _write(tmp_path, "bad.json", '[{"Phone Model": "x",')
    with pytest.raises(TraceError, match=r"bad\.json.*malformed JSON"):
        T.load_device_latency(p)


def test_error_missing_key(tmp_path):
    rec = _dev()
    del rec["ResNet STD"]
    p = _write(tmp_path, "dev.json", [_dev(), rec])
    with pytest.raises(TraceError, match=r"dev\.json.*record 1.*missing key 'ResNet STD'"):
        T.load_device_latency(p)
    p = _write(tmp_path, "flash.json", {"c7": {"isSuccess": True, "trace_start": 0, "ready_time": []}})
    with pytest.raises(TraceError, match=r"flash\.json.*'c7'.*missing key 'trace_end'"):
        T.load_flash(p)
    p = _write(tmp_path, "dist.json", {"g1": {"down_u": 1, "down_sigma": 1, "up_u": 1}})
    with pytest.raises(TraceError, match=r"dist\.json.*'g1'.*missing key 'up_sigma'"):
        T.load_speed_distribution(p)


def test_error_wrong_type(tmp_path):
    p = _write(tmp_path, "dev.json", [_dev(**{"ResNet Latency": "fast"})])
    with pytest.raises(TraceError, match=r"dev\.json.*'ResNet Latency'.*expected a number.*'fast'"):
        T.load_device_latency(p)
    p = _write(tmp_path, "mp.json", [{"network_type": "WIFI", "tcp_speed_kbps": 5}])
    with pytest.raises(TraceError, match=r"mp\.json.*test 0.*'tcp_speed_kbps'"):
        T.load_mobiperf(p)
    p = _write(tmp_path, "top.json", {"not": "a list"})
    with pytest.raises(TraceError, match=r"top\.json.*top level"):
        T.load_mobiperf(p)


def test_error_negative_and_nan(tmp_path):
    p = _write(tmp_path, "dev.json", [_dev(**{"ResNet STD": -2.0})])
    with pytest.raises(TraceError, match=r"dev\.json.*'ResNet STD'.*negative value -2\.0"):
        T.load_device_latency(p)
    p = _write(tmp_path, "mp.json", [{"tcp_speed_kbps": [1.0, -3.0]}])
    with pytest.raises(TraceError, match=r"mp\.json.*'tcp_speed_kbps'.*negative value -3\.0"):
        T.load_mobiperf(p)
    p = _write(tmp_path, "nan.json", '[{"Phone Model": "x", "ResNet Latency": NaN, "ResNet STD": 0}]')
    with pytest.raises(TraceError, match=r"nan\.json.*'ResNet Latency'.*non-finite"):
        T.load_device_latency(p)
    p = _write(tmp_path, "fl.json", {"c": {"isSuccess": True, "trace_start": 10, "trace_end": 100,
                                            "ready_time": [[20, 15]]}})
    with pytest.raises(TraceError, match=r"fl\.json.*'c'.*end < start"):
        T.load_flash(p)


def test_error_empty_after_filtering(tmp_path):
    p = _write(tmp_path, "zero.json", [_dev(**{"ResNet Latency": 0.0})])
    with pytest.raises(TraceError, match=r"zero\.json.*empty trace"):
        T.load_device_latency(p)
    p = _write(tmp_path, "fail.json", {"1": {"isSuccess": False, "trace_start": None,
                                             "trace_end": None, "ready_time": []}})
    with pytest.raises(TraceError, match=r"fail\.json.*empty trace.*isSuccess"):
        T.load_flash(p)


def test_trace_error_is_value_error():
    err = TraceError("f.json", "bad")
    assert isinstance(err, ValueError)
    assert str(err) == "trace file 'f.json': bad"
    assert pickle.loads(pickle.dumps(err)).path == "f.json"


def test_gzip_and_plain_json_agree(tmp_path):
    with gzip.open(data_path("traces", T.MOBIPERF_FILE), "rb") as fh:
        raw = fh.read()
    plain = tmp_path / "m.json"
    plain.write_bytes(raw)
    a, b = T.load_mobiperf(plain), T.load_mobiperf()
    assert np.array_equal(a.kbps, b.kbps) and np.array_equal(a.offsets, b.offsets)


# ----------------------------------------------------------------- FedScale
def _pickle(tmp_path, name, obj):
    p = tmp_path / name
    with open(p, "wb") as fh:
        pickle.dump(obj, fh, protocol=pickle.HIGHEST_PROTOCOL)
    return p


def test_fedscale_capacity_roundtrip(tmp_path):
    cap = {1: {"computation": 12.5, "communication": 3000.0},
           2: {"computation": 80.0, "communication": 150.5},
           3: {"computation": 0.0, "communication": 10.0}}  # zero -> excluded
    dev, bw = T.load_fedscale_capacity(_pickle(tmp_path, "cap.pkl", cap))
    assert len(dev) == len(bw) == 2 and dev.n_excluded == 1
    assert dev.unit == "sample"
    assert dev.model.tolist() == ["1", "2"]
    assert dev.latency_ms.tolist() == [12.5, 80.0] and dev.std_ms.tolist() == [0.0, 0.0]
    assert bw.sample_kbps([0, 1, 1], np.random.default_rng(0)).tolist() == [3000.0, 150.5, 150.5]
    np.testing.assert_allclose(dev.sample_latency_s([1], np.random.default_rng(0)), [0.08])
    assert len(T.load_trace("fedscale-capacity", _pickle(tmp_path, "c2.pkl", cap))[0]) == 2


def test_fedscale_behavior_roundtrip(tmp_path):
    beh = {
        "a": {"active": [10, 50], "inactive": [20, 60], "finish_time": 100, "duration": 90, "model": "x"},
        "b": {"active": [0, 8], "inactive": [2], "finish_time": 10, "duration": 10, "model": "y"},
    }
    a = T.load_fedscale_behavior(_pickle(tmp_path, "beh.pkl", beh))
    assert len(a) == 2 and a.trace_id.tolist() == ["a", "b"]
    assert a.duration_s.tolist() == [100.0, 10.0]
    assert a.starts.tolist() == [10, 50, 0, 8] and a.ends.tolist() == [20, 60, 2, 10]
    assert a.is_available([0, 0, 1, 1], [15.0, 130.0, 19.0, 25.0]).tolist() == [True, False, True, False]
    bad = {"a": {"active": [10], "inactive": [5], "finish_time": 100}}
    with pytest.raises(TraceError, match=r"bad\.pkl.*'a'.*before"):
        T.load_fedscale_behavior(_pickle(tmp_path, "bad.pkl", bad))
    missing = {"a": {"active": [10], "finish_time": 100}}
    with pytest.raises(TraceError, match=r"missing key 'inactive'"):
        T.load_fedscale_behavior(_pickle(tmp_path, "m.pkl", missing))


class _Evil:
    """Pickles to a call of os.system that would create a marker file."""

    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


class _EvilCtor:
    def __reduce__(self):
        return (_EvilCtor, ())


def test_malicious_pickle_refused(tmp_path):
    marker = tmp_path / "pwned"
    payload = {"1": {"computation": _Evil(marker), "communication": 1.0}}
    p = _pickle(tmp_path, "evil.pkl", payload)
    assert b"system" in p.read_bytes()
    for loader in (T.load_fedscale_capacity, T.load_fedscale_behavior, T.safe_load_pickle):
        with pytest.raises(TraceError, match=r"evil\.pkl.*refusing to load global .*system"):
            loader(p)
    assert not marker.exists()
    # any class reference is refused, even a harmless one, and protocol 0 too
    p0 = tmp_path / "ctor.pkl"
    p0.write_bytes(pickle.dumps({"x": _EvilCtor()}, protocol=0))
    with pytest.raises(TraceError, match="refusing to load global"):
        T.safe_load_pickle(p0)


def test_corrupt_and_missing_pickle(tmp_path):
    p = tmp_path / "junk.pkl"
    p.write_bytes(b"\x80\x05not a pickle")
    with pytest.raises(TraceError, match=r"junk\.pkl.*malformed pickle"):
        T.load_fedscale_capacity(p)
    with pytest.raises(TraceError, match="does not exist"):
        T.load_fedscale_behavior(tmp_path / "absent.pkl")
    p = _pickle(tmp_path, "list.pkl", [1, 2])
    with pytest.raises(TraceError, match=r"list\.pkl.*top level"):
        T.load_fedscale_capacity(p)


# ------------------------------------------------- property: brute-force check
from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

_interval = st.tuples(st.integers(0, 60), st.integers(0, 20)).map(lambda ab: (ab[0], ab[0] + ab[1]))


@settings(max_examples=60, deadline=None)
@given(
    traces=st.lists(st.tuples(st.integers(1, 60), st.lists(_interval, max_size=6)), min_size=1, max_size=5),
    times=st.lists(st.integers(-200, 400), min_size=1, max_size=20),
)
def test_availability_matches_brute_force(traces, times):
    durations = [d for d, _ in traces]
    ivs = [np.array(iv, dtype=float).reshape(-1, 2) for _, iv in traces]
    a = T.AvailabilityTrace.from_intervals(ivs, durations)
    for row, (dur, iv) in enumerate(traces):
        # clip as the loader does: intervals beyond the duration are cut/dropped
        kept = [(max(s, 0), min(e, dur)) for s, e in iv if s < dur]
        grid = np.arange(0, 3 * dur + 1)  # integer times, a few periods
        brute = np.array([any(s <= g % dur <= e for s, e in kept) for g in grid], dtype=bool)
        rows = np.full(len(times), row)
        tt = np.asarray(times, dtype=float)
        got = a.is_available(rows, tt)
        exp = np.array([any(s <= t % dur <= e for s, e in kept) for t in times], dtype=bool)
        assert np.array_equal(got, exp)
        nxt = a.next_available_s(rows, tt)
        if not kept:
            assert np.all(np.isinf(nxt))
            continue
        assert np.all(nxt >= tt) and a.is_available(rows, nxt).all()
        for t, n in zip(times, nxt):  # first integer time >= t that is available
            first = next(t + k for k in range(2 * dur + 1) if brute[(t + k) % dur])
            assert n <= first and n > first - 1

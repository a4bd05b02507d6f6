"""Unit tests of FedBuff's planner and aggregate, dropouts and compressed client updates (no MPI launch)."""

from __future__ import annotations

import math
import types

import numpy as np
import pytest
import torch

from hpcbench.fl.asynchronous import FedBuffPlanner, fedbuff_sum, staleness_weight
from hpcbench.fl.clock import ClientRegistry, VirtualClock
from hpcbench.fl.settings import clock_settings
from hpcbench.fl.config import ConfigError, FLConfig, load_config
from hpcbench.fl.uplink import UpdateCodec, model_tensors
from hpcbench.traces.availability import AvailabilityTrace


# ------------------------------------------------------------------------- staleness, aggregate
def test_staleness_weight_formula():
    np.testing.assert_array_equal(staleness_weight([0, 1, 3, 8]), [1.0, 1 / math.sqrt(2), 0.5, 1 / 3])
    with pytest.raises(ValueError, match="staleness"):
        staleness_weight([-1])


def test_fedbuff_sum_hand_computed():
    deltas = np.array([[1.0, 2.0], [4.0, -4.0], [9.0, 0.0]], np.float32)
    out = fedbuff_sum(deltas, np.array([0, 3, 8]), buffer_size=3)
    # (1 * d0 + 0.5 * d1 + d2 / 3) / 3
    np.testing.assert_allclose(out, [(1 + 2 + 3) / 3, (2 - 2 + 0) / 3], rtol=1e-15)
    assert out.dtype == np.float64
    with pytest.raises(ValueError):
        fedbuff_sum(deltas[:0], np.zeros(0), 1)
    with pytest.raises(ValueError):
        fedbuff_sum(deltas, np.zeros(2), 3)


# ------------------------------------------------------------------------------ the planner
class _LowestSelector:
    """Deterministic test double: the lowest candidate ids."""

    def select(self, n, candidates, count):
        return np.sort(candidates)[:count]


class _FakeClock:
    """Client c trains for ``durations[c]`` virtual seconds; online per ``online(c, t)``."""

    def __init__(self, durations, online=lambda c, t: True, dropouts=True):
        n = len(durations)
        self.settings = types.SimpleNamespace(seed=1, dropouts=dropouts)
        self.registry = types.SimpleNamespace(num_clients=n, availability_row=np.arange(n))
        self.durations = np.asarray(durations, np.float64)
        self.online = online
        self.availability = types.SimpleNamespace(
            is_available=lambda rows, t: np.array([self.online(int(r), float(np.broadcast_to(t, np.shape(rows))[i]))
                                                   for i, r in enumerate(np.atleast_1d(rows))], bool),
            next_available_s=lambda rows, t: np.full(len(rows), np.inf))
        self.selector = _LowestSelector()

    def client_times(self, ids, rng):
        return self.durations[ids], np.zeros(len(ids))

    def dropped_out(self, ids, finish_s):
        return ~self.availability.is_available(ids, finish_s) if self.settings.dropouts else np.zeros(len(ids), bool)


def _summary(update):
    return (update.version, update.time_s, [(t.task, t.client_id, t.start_version, t.staleness)
                                            for t in update.buffered], [t.task for t in update.stale])


def test_planner_hand_worked_event_sequence():
    """Concurrency 2, K 2, max_staleness 0; client 0 takes 4 s, client 1 10 s.

    t=0: tasks 1 (c0, v0, ends 4), 2 (c1, v0, ends 10). t=4: task 1 buffered; c1 busy,
    so task 3 is c0 again (v0, ends 8). t=8: task 3 buffered -> version 1; task 4 = c0 (v1,
    ends 12). t=10: task 2 has staleness 1 > 0 -> stale; task 5 = c1 (v1, ends 20).
    t=12: task 4 buffered; task 6 = c0 (v1, ends 16). t=16: task 6 -> version 2; task 7 =
    c0 (v2, ends 20). t=20: tie, task 5 first (stale, 2 - 1); task 8 = c1 (v2, ends 30);
    then task 7 buffered; task 9 = c0 (v2, ends 24). t=24: task 9 -> version 3.
    """
    planner = FedBuffPlanner(_FakeClock([4.0, 10.0]), concurrency=2, buffer_size=2, max_staleness=0)
    u1 = planner.next_update()
    assert _summary(u1) == (1, 8.0, [(1, 0, 0, 0), (3, 0, 0, 0)], [])
    assert planner.needed_versions() == {0, 1}  # task 2 (v0) and task 4 (v1) in flight
    u2 = planner.next_update()
    assert _summary(u2) == (2, 16.0, [(4, 0, 1, 0), (6, 0, 1, 0)], [2])
    assert u2.stale[0].staleness == 1 and u2.stale[0].status == "stale"
    assert planner.needed_versions() == {1, 2}  # task 5 (v1), task 7 (v2)
    u3 = planner.next_update()
    assert _summary(u3) == (3, 24.0, [(7, 0, 2, 0), (9, 0, 2, 0)], [5])
    assert [t.applied_in for t in u3.buffered] == [3, 3]
    assert u3.in_flight == 2
    assert {(t.task, t.client_id, t.start_version) for t in planner.in_flight()} == {(8, 1, 2), (10, 0, 3)}


def test_planner_staleness_within_bound_is_buffered_with_its_weight():
    planner = FedBuffPlanner(_FakeClock([4.0, 10.0]), concurrency=2, buffer_size=2, max_staleness=1)
    planner.next_update()
    u2 = planner.next_update()  # t=10: task 2 (staleness 1) now counts; t=12: task 4
    assert [(t.task, t.staleness) for t in u2.buffered] == [(2, 1), (4, 0)]
    assert u2.time_s == 12.0 and not u2.stale
    assert staleness_weight([t.staleness for t in u2.buffered]).tolist() == [1 / math.sqrt(2), 1.0]


def test_planner_never_runs_a_client_twice_at_once():
    rng = np.random.default_rng(0)
    clock = _FakeClock(rng.uniform(1, 30, size=12))
    clock.selector = types.SimpleNamespace(
        select=lambda n, c, k: np.sort(np.random.default_rng(n).choice(c, size=min(k, len(c)), replace=False)))
    planner = FedBuffPlanner(clock, concurrency=8, buffer_size=3, max_staleness=2)
    tasks = []
    for _ in range(40):
        u = planner.next_update()
        tasks += u.buffered + u.stale + u.dropouts
        busy = [t.client_id for t in planner.in_flight()]
        assert len(busy) == len(set(busy)) == 8
    tasks += planner.in_flight()
    for cid in range(12):  # a client's tasks never overlap in time
        spans = sorted((t.start_s, t.finish_s) for t in tasks if t.client_id == cid)
        assert all(a[1] <= b[0] for a, b in zip(spans, spans[1:]))
    assert max(t.staleness for t in tasks if t.status == "stale") > 2
    assert all(t.staleness <= 2 for t in tasks if t.status == "aggregated")


def test_planner_dropout_at_finish_time():
    """Client 0 is offline at t = 4 (its first finish): a dropout, not counted toward K."""
    clock = _FakeClock([4.0, 6.0, 7.0], online=lambda c, t: not (c == 0 and t == 4.0))
    planner = FedBuffPlanner(clock, concurrency=2, buffer_size=2, max_staleness=5)
    u1 = planner.next_update()
    # t=4: task 1 (c0) drops out; c0 is offline then, so task 3 = c2 (ends 11); t=6: task 2
    # (c1) buffered, task 4 = c0 (ends 10); t=10: task 4 buffered -> version 1
    assert [(t.task, t.client_id) for t in u1.dropouts] == [(1, 0)]
    assert u1.dropouts[0].status == "dropped" and u1.dropouts[0].finish_s == 4.0
    assert [(t.task, t.client_id) for t in u1.buffered] == [(2, 1), (4, 0)] and u1.time_s == 10.0
    assert [(t.task, t.client_id) for t in planner.in_flight()] == [(3, 2), (5, 0)]
    clock.settings.dropouts = False
    u1 = FedBuffPlanner(clock, concurrency=2, buffer_size=2, max_staleness=5).next_update()
    assert not u1.dropouts and [t.task for t in u1.buffered] == [1, 2]


# ------------------------------------------------------------------------ sync dropouts
class _Device:
    def __len__(self):
        return 4

    def sample_latency_s(self, rows, rng):  # client r computes for (r + 1) s (1 step x 1 sample)
        return np.asarray(rows, np.float64) + 1.0


class _Bandwidth:
    def __len__(self):
        return 4

    def sample_kbps(self, rows, rng, direction="down"):
        return np.full(len(rows), 8.0)  # 1000 bytes each way: 1 s down + 1 s up


def _trace_clock(dropouts=True):
    # client 0 online throughout; 1 leaves at 2.5 s (finishes at 4); 2 leaves at 4.5 s and
    # returns at 4.9 s (finishes at 5: online then, FedScale's finish-time check); 3 leaves at 5.5 s
    trace = AvailabilityTrace.from_intervals(
        [np.array([[0, 100]]), np.array([[0, 2.5]]), np.array([[0, 4.5], [4.9, 100]]), np.array([[0, 5.5]])],
        np.full(4, 100.0))
    cfg = FLConfig.model_validate({"participants": 3, "overcommitment": 4 / 3, "local_steps": 1, "batch_size": 1,
                                   "dataset": {"num_clients": 4}, "dropouts": dropouts})
    reg = ClientRegistry(4, np.full(4, 10), 4, 4, 4, seed=1)
    reg.device_row = reg.bandwidth_row = reg.availability_row = np.arange(4, dtype=np.int32)
    return VirtualClock(clock_settings(cfg), reg, _Device(), _Bandwidth(), trace, 1000, _LowestSelector())


def test_sync_dropouts_on_hand_made_trace():
    timing = _trace_clock().next_round(1)
    np.testing.assert_array_equal(timing.completion_s, [3.0, 4.0, 5.0, 6.0])
    np.testing.assert_array_equal(timing.dropped, [False, True, False, True])
    np.testing.assert_array_equal(timing.aggregated, [True, False, True, False])
    assert timing.end_s == 5.0  # only 2 of the 3 wanted finish: the round ends at the last of them
    off = _trace_clock(dropouts=False).next_round(1)
    assert not off.dropped.any() and off.aggregated.tolist() == [True, True, True, False] and off.end_s == 5.0


def test_sync_round_where_everyone_drops_out_ends_at_last_finish():
    clock = _trace_clock()
    clock.availability = AvailabilityTrace.from_intervals([np.array([[0, 0.5]])] * 4, np.full(4, 100.0))
    timing = clock.next_round(1)
    assert timing.dropped.all() and not timing.aggregated.any() and timing.end_s == 6.0


def test_clock_charges_compressed_bytes_per_direction():
    clock = _trace_clock(dropouts=False)
    clock.up_bytes = 100  # 0.1 s at 8 kbit/s
    timing = clock.next_round(1)
    np.testing.assert_allclose(timing.communication_s, 1.1)


# ------------------------------------------------------------------------------- the codec
def _model():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(16, 8), torch.nn.ReLU(), torch.nn.Linear(8, 4))


def _section(**kw):
    return load_config(None, {f"uplink_compression.{k}": str(v) for k, v in kw.items()}).uplink_compression


def test_none_codec_is_bitwise_identity():
    model = _model()
    codec = UpdateCodec(_section(name="none", error_feedback="true"), model_tensors(model), 1)
    p = sum(t.numel() for t in model.parameters())
    assert codec.wire_bytes == p * 4
    rng = np.random.default_rng(1)
    for step in range(5):
        d = rng.standard_normal(p).astype(np.float32)
        d[::7] = -0.0
        out, nbytes = codec.encode(d, client_id=step % 2)
        assert out.tobytes() == d.tobytes() and nbytes == p * 4
    assert codec.residual_clients() == []  # none leaves no residual


def test_topk_codec_bytes_error_feedback_and_lru():
    model = _model()
    tensors = model_tensors(model)
    codec = UpdateCodec(_section(name="topk", ratio=0.1, max_residuals=2), tensors, 1)
    p = sum(t.numel() for t in model.parameters())
    ks = [math.ceil(0.1 * np.prod(s)) for _, s in tensors]
    assert codec.wire_bytes == sum(ks) * 8 < p * 4  # int32 index + float32 value per kept element
    rng = np.random.default_rng(2)
    d1, d2 = rng.standard_normal(p).astype(np.float32), rng.standard_normal(p).astype(np.float32)
    out1, nbytes = codec.encode(d1, client_id=7)
    assert nbytes == codec.wire_bytes and np.count_nonzero(out1) == sum(ks)
    out2, _ = codec.encode(d2, client_id=7)
    # error feedback: what was sent plus what is kept is everything the client produced
    residual = np.concatenate([codec.state_dict()["residuals"][7][name].ravel() for name, _ in tensors])
    np.testing.assert_allclose(out1 + out2 + residual, d1 + d2, rtol=0, atol=1e-6)
    codec.encode(d1, client_id=8)
    codec.encode(d1, client_id=9)  # cap 2: client 7, least recently used, loses its residual
    assert codec.residual_clients() == [8, 9]


def test_codec_state_dict_round_trip():
    model = _model()
    section = _section(name="topk", ratio=0.2)
    a, b = (UpdateCodec(section, model_tensors(model), 1) for _ in range(2))
    rng = np.random.default_rng(3)
    p = sum(t.numel() for t in model.parameters())
    for cid in (1, 2, 1):
        a.encode(rng.standard_normal(p).astype(np.float32), cid)
    b.load_state_dict(a.state_dict())
    d = rng.standard_normal(p).astype(np.float32)
    assert a.encode(d, 1)[0].tobytes() == b.encode(d, 1)[0].tobytes()
    assert a.residual_clients() == b.residual_clients() == [2, 1]


# ------------------------------------------------------------------------- config: new keys
@pytest.mark.parametrize("key, value, needle", [
    ("mode", "fast", "mode"),
    ("asynchronous.concurrency", "0", "asynchronous.concurrency"),
    ("asynchronous.buffer_size", "-2", "asynchronous.buffer_size"),
    ("asynchronous.max_staleness", "-1", "asynchronous.max_staleness"),
    ("dropouts", "maybe", "dropouts"),
    ("uplink_compression.name", "zip", "uplink_compression"),
    ("uplink_compression.name", "dgc", "value-dependent"),
    ("uplink_compression.ratio", "1.5", "uplink_compression.ratio"),
    ("uplink_compression.options", "{levels: 0}", "uplink_compression"),
    ("uplink_compression.error_feedback", "often", "uplink_compression.error_feedback"),
    ("uplink_compression.max_residuals", "0", "uplink_compression.max_residuals"),
    ("downlink_compression.name", "zip", "downlink_compression"),
    ("downlink_compression.ratio", "0", "downlink_compression.ratio"),
    ("downlink_compression.options", "[1]", "downlink_compression.options"),
])
def test_new_keys_bad_values_name_key_and_value(key, value, needle):
    overrides = {key: value}
    if key == "uplink_compression.options":
        overrides["uplink_compression.name"] = "qsgd"
    with pytest.raises(ConfigError) as info:
        load_config(None, overrides)
    assert needle in str(info.value) and value.strip("{}[]").split(":")[0] in str(info.value), str(info.value)


def test_async_refuses_aggregator_without_pseudo_gradient():
    """q-FedAvg needs per-client losses, which FedBuff's buffered sum has not; the message lists the others."""
    with pytest.raises(ConfigError, match="qfedavg") as info:
        load_config(None, {"mode": "async", "aggregator.name": "qfedavg"})
    assert "fedyogi" in str(info.value)
    assert load_config(None, {"mode": "async", "aggregator.name": "fedyogi"}).aggregator.name == "fedyogi"


def test_ratio_refused_by_compressor_without_one():
    with pytest.raises(ConfigError, match="takes no ratio"):
        load_config(None, {"uplink_compression.name": "fp16", "uplink_compression.ratio": "0.5"})

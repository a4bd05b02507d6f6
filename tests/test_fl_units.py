"""Fast unit tests of the federated emulation's parts (no MPI launch)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from hpcbench.fl.aggregation.fedavg import FedAvg, weighted_average
from hpcbench.fl.contracts import ClientUpdates
from hpcbench.fl.clock import ClientRegistry, VirtualClock
from hpcbench.fl.config import clock_settings
from hpcbench.fl.config import ConfigError, DatasetConfig, FLConfig, load_config
from hpcbench.fl.data.partition import dirichlet_partition, iid_partition, sampled_partition
from hpcbench.fl.executors.pool import assign_clients
from hpcbench.fl.selection.random import RandomSelector


# ------------------------------------------------------------------------------------ FedAvg
def _updates(n):
    n = np.asarray(n, dtype=np.float64)
    return ClientUpdates(np.arange(len(n)), n, np.ones(len(n)), np.full(len(n), np.nan), 0.1)


def _random_selector(cfg, num_clients):
    return RandomSelector(cfg.selection, cfg.seed, np.full(num_clients, 10), np.ones(num_clients), 28)


def test_weighted_average_matches_hand_computation():
    deltas = np.array([[1.0, 2.0, -3.0], [4.0, 0.0, 1.0], [-2.0, 6.0, 0.5]], dtype=np.float32)
    n = np.array([1, 3, 4])
    expected = np.array([(1 * 1 + 3 * 4 + 4 * -2) / 8, (1 * 2 + 3 * 0 + 4 * 6) / 8,
                         (1 * -3 + 3 * 1 + 4 * 0.5) / 8])
    out = weighted_average(deltas, n)
    assert out.dtype == np.float64 and out.shape == (3,)
    np.testing.assert_allclose(out, expected, rtol=1e-12)


def test_weighted_average_equal_weights_is_mean():
    rng = np.random.default_rng(0)
    deltas = rng.standard_normal((7, 50)).astype(np.float32)
    np.testing.assert_allclose(weighted_average(deltas, np.full(7, 5)),
                               deltas.astype(np.float64).mean(axis=0), rtol=1e-12, atol=1e-15)


def test_weighted_average_zero_weight_ignores_row():
    deltas = np.array([[1.0, 1.0], [100.0, -100.0]], dtype=np.float32)
    np.testing.assert_array_equal(weighted_average(deltas, [2, 0]), [1.0, 1.0])


@pytest.mark.parametrize("deltas, n", [
    (np.zeros((2, 3), np.float32), [1, 2, 3]),          # count length mismatch
    (np.zeros(3, np.float32), [1, 2, 3]),               # deltas not 2-D
    (np.zeros((0, 3), np.float32), np.zeros(0)),        # no clients
    (np.zeros((2, 3), np.float32), [1, -1]),            # negative count
    (np.zeros((2, 3), np.float32), [0, 0]),             # all zero
])
def test_weighted_average_bad_inputs(deltas, n):
    with pytest.raises(ValueError):
        weighted_average(deltas, n)


def test_aggregation_fixed_order_is_deterministic():
    rng = np.random.default_rng(1)
    deltas = (rng.standard_normal((33, 1000)) * 10.0 ** rng.integers(-6, 6, (33, 1))).astype(np.float32)
    n = rng.integers(1, 500, 33)
    first = weighted_average(deltas, n)
    for _ in range(3):
        again = weighted_average(deltas.copy(), n.copy())
        assert again.tobytes() == first.tobytes()
    cfg = FLConfig()
    g = rng.standard_normal(1000).astype(np.float32)
    a = FedAvg(cfg.aggregator).aggregate(g, deltas, _updates(n), 1)
    b = FedAvg(cfg.aggregator).aggregate(g.copy(), deltas.copy(), _updates(n.copy()), 1)
    assert a.dtype == np.float32 and a.tobytes() == b.tobytes()
    np.testing.assert_allclose(a, (g + first).astype(np.float32), rtol=1e-6, atol=1e-6)


def test_weighted_average_blocks_give_the_bits_of_one_pass_per_client():
    """Column blocks (``_COLUMNS``) change the loop order, not any element's sum: the bits of
    ``sum += w_k * float64(delta_k)`` client by client, also where P is not a multiple of the block."""
    from hpcbench.fl.aggregation import fedavg

    rng = np.random.default_rng(7)
    for m, p in [(1, 3), (5, fedavg._COLUMNS), (9, 2 * fedavg._COLUMNS + 11)]:
        deltas = (rng.standard_normal((m, p)) * 10.0 ** rng.integers(-6, 6, (m, 1))).astype(np.float32)
        n = rng.integers(1, 500, m)
        weights = n / n.sum()
        one_pass = np.zeros(p)
        for w, d in zip(weights, deltas):
            one_pass += w * d.astype(np.float64)
        assert weighted_average(deltas, n).tobytes() == one_pass.tobytes()


def test_fedavg_server_learning_rate():
    cfg = FLConfig.model_validate({"aggregator": {"name": "fedavg", "server_learning_rate": 0.5}})
    g = np.ones(2, np.float32)
    out = FedAvg(cfg.aggregator).aggregate(g, np.array([[2.0, 4.0]], np.float32), _updates([3]), 1)
    np.testing.assert_array_equal(out, [2.0, 3.0])


# ------------------------------------------------------------------------------- partitions
def _csr_parts(offsets, indices):
    return [indices[offsets[c]:offsets[c + 1]] for c in range(len(offsets) - 1)]


def _check_csr(offsets, indices, num_clients):
    assert offsets.dtype == np.int64 and offsets.shape == (num_clients + 1,)
    assert indices.dtype == np.int32 and indices.shape == (offsets[-1],)
    assert offsets[0] == 0 and np.all(np.diff(offsets) >= 0)


def test_iid_partition_disjoint_and_covering():
    offsets, indices = iid_partition(1000, 7, np.random.default_rng(3))
    _check_csr(offsets, indices, 7)
    assert np.array_equal(np.sort(indices), np.arange(1000))  # disjoint + covering
    sizes = np.diff(offsets)
    assert sizes.max() - sizes.min() <= 1


def test_iid_partition_too_many_clients():
    with pytest.raises(ValueError):
        iid_partition(5, 6, np.random.default_rng(0))


def _labels(per_class=100, classes=10):
    return np.repeat(np.arange(classes), per_class)


def test_dirichlet_partition_disjoint_covering_nonempty():
    labels = _labels()
    for alpha in (0.05, 0.5, 10.0):
        offsets, indices = dirichlet_partition(labels, 40, alpha, np.random.default_rng(5))
        _check_csr(offsets, indices, 40)
        assert np.array_equal(np.sort(indices), np.arange(len(labels)))
        assert np.diff(offsets).min() >= 1


def _mean_label_entropy(labels, offsets, indices):
    ents = []
    for part in _csr_parts(offsets, indices):
        p = np.bincount(labels[part], minlength=10) / len(part)
        p = p[p > 0]
        ents.append(-(p * np.log(p)).sum())
    return float(np.mean(ents))


def test_dirichlet_smaller_alpha_more_skew():
    labels = _labels()
    ent = {}
    for alpha in (0.1, 1.0, 100.0):
        ent[alpha] = _mean_label_entropy(labels, *dirichlet_partition(labels, 20, alpha, np.random.default_rng(7)))
    assert ent[0.1] < ent[1.0] < ent[100.0]
    assert ent[100.0] > 0.9 * math.log(10)  # near IID


def test_dirichlet_partition_impossible():
    with pytest.raises(ValueError):
        dirichlet_partition(_labels(1, 10), 11, 0.5, np.random.default_rng(0))


@pytest.mark.parametrize("alpha", [None, 0.3])
def test_sampled_partition_shapes_and_reproducible(alpha):
    labels = _labels(30)
    a = sampled_partition(labels, 1000, 12, alpha, np.random.default_rng([9, 1]), chunk=300)
    b = sampled_partition(labels, 1000, 12, alpha, np.random.default_rng([9, 1]), chunk=300)
    offsets, indices = a
    _check_csr(offsets, indices, 1000)
    assert np.array_equal(offsets, np.arange(1001) * 12)
    assert indices.min() >= 0 and indices.max() < len(labels)
    assert np.array_equal(a[0], b[0]) and np.array_equal(a[1], b[1])
    c = sampled_partition(labels, 1000, 12, alpha, np.random.default_rng([9, 2]), chunk=300)
    assert not np.array_equal(a[1], c[1])


def test_sampled_partition_alpha_skews_labels():
    labels = _labels(30)
    skewed = _mean_label_entropy(labels, *sampled_partition(labels, 300, 50, 0.1, np.random.default_rng(1)))
    iid = _mean_label_entropy(labels, *sampled_partition(labels, 300, 50, None, np.random.default_rng(1)))
    assert skewed < 0.6 * iid


def test_million_clients_metadata_small():
    from hpcbench.fl.data.digits import DigitsDataset

    cfg = DatasetConfig(num_clients=1_000_000, samples_per_client=10, partition="dirichlet", alpha=0.5)
    ds = DigitsDataset(cfg, seed=1)
    assert ds.num_clients == 1_000_000
    assert np.all(ds.client_sizes() == 10)
    reg = ClientRegistry(ds.num_clients, ds.client_sizes(), 978, 100, 1000, seed=1)
    nbytes = ds.metadata_nbytes() + reg.nbytes()
    print(f"\n1,000,000 clients x 10 samples: client metadata {nbytes / 1e6:.1f} MB "
          f"(dataset {ds.metadata_nbytes() / 1e6:.1f} MB + registry {reg.nbytes() / 1e6:.1f} MB)")
    assert nbytes < 200e6
    shard = ds.shard(999_999)
    assert shard.num_examples == 10


# ------------------------------------------------------------------------ inputs loaded in a child
class _FailingInputs:
    """A dataset class whose loading step fails (imported by name in the child process)."""

    name = "failing"

    @staticmethod
    def load_inputs(cfg, seed):
        raise OSError(f"inputs of seed {seed} unreadable")


def test_load_in_child_returns_the_inputs_and_raises_its_errors():
    from hpcbench.fl.data import load_in_child
    from hpcbench.fl.data.digits import DigitsDataset

    cfg = DatasetConfig(test_fraction=0.3)
    got = load_in_child(DigitsDataset, cfg, 7)
    want = DigitsDataset.load_inputs(cfg, 7)
    assert all(a.dtype == b.dtype and np.array_equal(a, b) for a, b in zip(got, want))
    with pytest.raises(OSError, match="inputs of seed 4 unreadable"):
        load_in_child(_FailingInputs, cfg, 4)


# ------------------------------------------------------------------------------------ clock
class _StubDevice:
    """Row r has a fixed per-sample latency of (r + 1) ms."""

    def __init__(self, n):
        self.n = n

    def __len__(self):
        return self.n

    def sample_latency_s(self, rows, rng):
        return (np.asarray(rows, dtype=np.float64) + 1.0) / 1000.0


class _StubBandwidth:
    """Row r has a fixed bandwidth of 100 * (r + 1) kbit/s both ways."""

    def __init__(self, n):
        self.n = n

    def __len__(self):
        return self.n

    def sample_kbps(self, rows, rng, direction="down"):
        return 100.0 * (np.asarray(rows, dtype=np.float64) + 1.0)


class _StubAvailability:
    """Even rows always online, odd rows never (next_available far away)."""

    def __init__(self, n):
        self.n = n

    def __len__(self):
        return self.n

    def is_available(self, rows, t_s):
        return np.asarray(rows) % 2 == 0

    def next_available_s(self, rows, t_s):
        return np.where(np.asarray(rows) % 2 == 0, t_s, np.inf)


def _stub_clock(num_clients=50, participants=5, overcommitment=1.4, seed=3, compute_scale=2.0,
                model_bytes=40_000, availability=None):
    cfg = FLConfig.model_validate({
        "seed": seed, "participants": participants, "overcommitment": overcommitment,
        "local_steps": 7, "batch_size": 4, "dataset": {"num_clients": num_clients},
        "traces": {"compute_scale": compute_scale}})
    reg = ClientRegistry(num_clients, np.full(num_clients, 10), num_clients, num_clients, num_clients, seed)
    reg.device_row = np.arange(num_clients, dtype=np.int32)
    reg.bandwidth_row = np.arange(num_clients, dtype=np.int32)[::-1].copy()
    reg.availability_row = np.arange(num_clients, dtype=np.int32)
    avail = availability or _StubAvailability(num_clients)
    clock = VirtualClock(clock_settings(cfg), reg, _StubDevice(num_clients), _StubBandwidth(num_clients), avail,
                         model_bytes, _random_selector(cfg, num_clients))
    return cfg, reg, clock


def test_clock_compute_and_communication_formulas():
    cfg, reg, clock = _stub_clock()
    t = clock.next_round(1)
    ids = t.client_ids
    lat = (reg.device_row[ids] + 1.0) / 1000.0
    np.testing.assert_allclose(t.compute_s, 7 * 4 * lat * 2.0, rtol=1e-12)
    kbps = 100.0 * (reg.bandwidth_row[ids] + 1.0)
    np.testing.assert_allclose(t.communication_s, 2 * 40_000 * 8 / 1000 / kbps, rtol=1e-12)
    np.testing.assert_allclose(t.completion_s, t.compute_s + t.communication_s)


def test_clock_round_end_and_stragglers():
    cfg, reg, clock = _stub_clock(participants=5, overcommitment=1.4)
    prev_end = 0.0
    for r in range(1, 6):
        t = clock.next_round(r)
        assert t.online == 25
        assert len(t.client_ids) == math.ceil(5 * 1.4) == 7
        assert np.all(np.diff(t.client_ids) > 0)
        assert t.aggregated.sum() == 5
        assert (~t.aggregated).sum() == len(t.client_ids) - 5
        assert t.start_s == pytest.approx(prev_end)
        fifth = np.sort(t.completion_s)[4]
        assert t.end_s - t.start_s == pytest.approx(fifth, rel=1e-12)
        # aggregated = the earliest finishers, stragglers finish no earlier
        assert t.completion_s[t.aggregated].max() <= t.completion_s[~t.aggregated].min()
        prev_end = t.end_s
        assert clock.now_s == t.end_s


def test_clock_fewer_online_than_wanted():
    cfg, reg, clock = _stub_clock(num_clients=12, participants=5, overcommitment=2.0)
    t = clock.next_round(1)
    assert t.online == 6
    assert len(t.client_ids) == 6  # capped by online
    assert t.aggregated.sum() == 5


def test_clock_availability_respected_stub():
    cfg, reg, clock = _stub_clock()
    for r in range(1, 8):
        t = clock.next_round(r)
        assert np.all(reg.availability_row[t.client_ids] % 2 == 0)


def _real_clock(seed):
    from hpcbench.traces import load_device_latency, load_flash, load_mobiperf

    dev, bw, av = load_device_latency(), load_mobiperf(), load_flash()
    cfg = FLConfig.model_validate({"seed": seed, "participants": 10, "dataset": {"num_clients": 2000}})
    reg = ClientRegistry(2000, np.full(2000, 10), len(dev), len(bw), len(av), seed)
    return reg, av, VirtualClock(clock_settings(cfg), reg, dev, bw, av, 19_240, _random_selector(cfg, 2000))


def test_clock_real_traces_availability_and_reproducible():
    reg, av, clock_a = _real_clock(11)
    _, _, clock_b = _real_clock(11)
    for r in range(1, 11):
        a, b = clock_a.next_round(r), clock_b.next_round(r)
        assert np.all(av.is_available(reg.availability_row[a.client_ids], a.start_s))
        assert a.online >= len(a.client_ids)
        for field in ("client_ids", "compute_s", "communication_s", "completion_s", "aggregated"):
            assert np.array_equal(getattr(a, field), getattr(b, field)), field
        assert (a.start_s, a.end_s) == (b.start_s, b.end_s)
        assert a.end_s > a.start_s
    _, _, clock_c = _real_clock(12)
    c = clock_c.next_round(1)
    _, _, clock_d = _real_clock(11)
    assert not np.array_equal(c.completion_s, clock_d.next_round(1).completion_s)


# ------------------------------------------------------------------------- assign_clients
def test_assign_clients_contiguous_runs_in_id_order_balanced_by_work():
    rng = np.random.default_rng(21)
    for _ in range(60):
        m = int(rng.integers(1, 40))
        k = int(rng.integers(1, 6))
        ids = rng.choice(10_000, m, replace=False).astype(np.int64)  # any order in, ascending out
        work = rng.integers(1, 50, m).astype(np.float64)
        executors = sorted(rng.choice(64, k, replace=False).tolist())
        plan = assign_clients(ids, work, executors)
        assert list(plan) == executors  # runs in the order of the executors...
        got = np.concatenate(list(plan.values()))
        assert np.array_equal(got, np.sort(ids))  # ...list every client once, in ascending id order
        w_of = dict(zip(ids.tolist(), work.tolist()))
        for v in plan.values():
            assert v.dtype == np.int64
        makespan = max(sum(w_of[int(c)] for c in v) for v in plan.values())
        assert makespan <= work.sum() / k + work.max() + 1e-9


def test_assign_clients_single_executor_and_empty():
    ids = np.array([5, 2, 9], np.int64)
    plan = assign_clients(ids, np.ones(3), [0])
    assert np.array_equal(plan[0], [2, 5, 9])
    plan = assign_clients(np.zeros(0, np.int64), np.zeros(0), [1, 2, 3])
    assert all(len(v) == 0 for v in plan.values())


def test_assign_clients_deterministic_ties():
    ids = np.arange(12, dtype=np.int64)
    a = assign_clients(ids, np.ones(12), [1, 2, 3])
    b = assign_clients(ids[::-1].copy(), np.ones(12), [1, 2, 3])
    assert all(np.array_equal(a[r], b[r]) for r in a)
    assert all(len(v) == 4 for v in a.values())


# -------------------------------------------------------------------------------- Shakespeare
def test_split_by_role_small_text():
    from hpcbench.fl.data.shakespeare import split_by_role

    text = ("First Citizen:\nBefore we proceed any further, hear me speak.\n\n"
            "All:\nSpeak, speak.\n\n"
            "First Citizen:\nYou are all resolved rather to die\nthan to famish?\n\n"
            "Stage direction without a speaker\n\n"
            "MENENIUS:\nWhy, masters.")
    roles = split_by_role(text)
    assert list(roles) == ["First Citizen", "All", "MENENIUS"]
    assert roles["First Citizen"] == ("Before we proceed any further, hear me speak.\n"
                                      "You are all resolved rather to die\nthan to famish?")
    assert roles["All"] == "Speak, speak."
    assert roles["MENENIUS"] == "Why, masters."


def test_bundled_shakespeare_has_hundreds_of_roles():
    from hpcbench.fl.data.shakespeare import ShakespeareDataset

    ds = ShakespeareDataset(DatasetConfig(name="shakespeare", partition="natural"), seed=1)
    assert ds.num_clients >= 200
    assert len(set(ds.roles)) == ds.num_clients
    assert np.all(ds.client_sizes() >= 2)
    shard = ds.shard(0)
    import torch
    x, y = shard.batch(torch.tensor([0, 1]))
    assert x.shape == (2, ds.seq_len) and torch.equal(x[:, 1:], y[:, :-1])


# ------------------------------------------------------------------------------- config errors
def _write(tmp_path, text):
    p = tmp_path / "job.yaml"
    p.write_text(text)
    return p


def test_config_defaults_and_override():
    cfg = load_config(None, {"rounds": "7", "dataset.alpha": "0.1"})
    assert cfg.rounds == 7 and cfg.dataset.alpha == 0.1


def test_config_example_file_loads():
    from pathlib import Path

    cfg = load_config(Path(__file__).resolve().parent.parent / "jobs" / "configs" / "digits.yaml")
    assert cfg.rounds == 100 and cfg.dataset.name == "digits"


@pytest.mark.parametrize("text, needles", [
    ("rounds: 5\nbogus_key: 3\n", ["bogus_key", "3"]),
    ("dataset:\n  alfa: 0.3\n", ["alfa", "0.3"]),
    ("rounds: ten\n", ["rounds", "ten"]),
    ("rounds: 0\n", ["rounds", "0"]),
    ("dataset:\n  alpha: -1.5\n", ["dataset.alpha", "-1.5"]),
    ("learning_rate: [1, 2]\n", ["learning_rate"]),
    ("traces:\n  device:\n    column: VGG\n", ["traces.device.column", "VGG"]),
])
def test_config_file_errors_name_key_and_value(tmp_path, text, needles):
    p = _write(tmp_path, text)
    with pytest.raises(ConfigError) as info:
        load_config(p)
    msg = str(info.value)
    for needle in needles:
        assert needle in msg, msg
    assert str(p) in msg


@pytest.mark.parametrize("overrides, needles", [
    ({"nonexistent.key": "1"}, ["nonexistent.key", "1"]),
    ({"rounds": "abc"}, ["rounds", "abc"]),
    ({"participants": "0"}, ["participants", "0"]),
    ({"dataset.test_fraction": "1.5"}, ["dataset.test_fraction", "1.5"]),
])
def test_config_override_errors(overrides, needles):
    with pytest.raises(ConfigError) as info:
        load_config(None, overrides)
    for needle in needles:
        assert needle in str(info.value), str(info.value)


def test_config_bad_yaml(tmp_path):
    p = _write(tmp_path, "rounds: [1, 2\nseed: 3\n")
    with pytest.raises(ConfigError, match="not valid YAML"):
        load_config(p)


def test_config_top_level_not_mapping(tmp_path):
    with pytest.raises(ConfigError, match="mapping"):
        load_config(_write(tmp_path, "- 1\n- 2\n"))


def test_config_missing_file(tmp_path):
    missing = tmp_path / "nope.yaml"
    with pytest.raises(ConfigError) as info:
        load_config(missing)
    assert str(missing) in str(info.value) and "does not exist" in str(info.value)


def test_config_cross_field_errors():
    with pytest.raises(ConfigError, match="participants"):
        load_config(None, {"participants": "200", "dataset.num_clients": "100"})
    with pytest.raises(ConfigError, match="charlstm"):
        load_config(None, {"model.name": "charlstm"})

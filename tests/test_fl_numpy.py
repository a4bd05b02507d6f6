"""``client_training: numpy`` (hpcbench.fl.engines.numpy_training): exact gradients, torch-equal training, no torch."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest
import torch
from pydantic import ValidationError

from hpcbench.fl.aggregation import AGGREGATORS
from hpcbench.fl.engines.batched_training import _batch_indices
from hpcbench.fl.config import DatasetConfig, FLConfig, ModelConfig
from hpcbench.fl.data import DigitsDataset
from hpcbench.fl.models import MODELS, build_model, build_numpy_model, flat_parameters, load_flat_parameters
from hpcbench.fl.engines.numpy_training import batch_indices, client_rng, evaluate_numpy, train_clients_numpy
from hpcbench.fl.engines.training import client_generator, evaluate, train_client
from hpcbench.results import read_attrs, read_table
from mpitools import ROOT, run_mpi


@pytest.fixture(scope="module")
def digits():
    torch.set_num_threads(1)
    return DigitsDataset(DatasetConfig(num_clients=40, alpha=0.3, samples_per_client=None), seed=3)


@pytest.mark.parametrize("name,hidden", [("mlp", 32), ("mlp", 1), ("logreg", 0)])
def test_gradients_equal_autograd(digits, name, hidden):
    cfg = ModelConfig(name=name, hidden=max(hidden, 1))
    torch_model = build_model(cfg, digits, 5)
    model = build_numpy_model(cfg, digits, 5)
    assert model.num_parameters == sum(p.numel() for p in torch_model.parameters())
    rng = np.random.default_rng(0)
    m, b = 3, 7
    flat = rng.normal(0, 0.5, (m, model.num_parameters)).astype(np.float32)
    x = rng.random((m, b, digits.num_features), dtype=np.float32)
    y = rng.integers(0, digits.num_classes, (m, b))
    grad = np.full_like(flat, np.nan)
    losses = model.loss_and_grad(flat, x, y, grad)
    for k in range(m):
        load_flat_parameters(torch_model, torch.from_numpy(flat[k]))
        torch_model.zero_grad()
        logits = torch_model(torch.from_numpy(x[k]))
        torch_model.loss(logits, torch.from_numpy(y[k])).backward()
        expected = torch.cat([p.grad.reshape(-1) for p in torch_model.parameters()]).numpy()
        np.testing.assert_allclose(grad[k], expected, rtol=1e-4, atol=1e-6)
        np.testing.assert_allclose(losses[k], torch_model.sample_losses(logits, torch.from_numpy(y[k]))
                                   .detach().numpy(), rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(model.logits(flat[k:k + 1], x[k:k + 1])[0], logits.detach().numpy(),
                                   rtol=1e-5, atol=1e-6)
    assert np.abs(grad).max() > 1e-3


def test_init_draws_nn_linear_distribution(digits):
    model = build_numpy_model(ModelConfig(name="mlp", hidden=64), digits, 1)
    first = model.initial[:64 * 64].reshape(64, 64)
    bound = 1 / np.sqrt(64)
    assert np.abs(first).max() <= bound and np.abs(first).max() > 0.95 * bound
    assert abs(first.mean()) < 0.01 and first.std() == pytest.approx(bound / np.sqrt(3), rel=0.05)
    assert not np.array_equal(model.initial, build_numpy_model(ModelConfig(name="mlp"), digits, 2).initial)


@pytest.mark.parametrize("momentum,aggregator", [(0.0, "fedavg"), (0.9, "fedavg"), (0.0, "fedprox"),
                                                 (0.0, "qfedavg")])
def test_local_training_equals_torch_engine(digits, momentum, aggregator):
    """Same initial vector and mini-batches: the numpy engine's clients match ``train_client``'s."""
    cfg = ModelConfig(name="mlp", hidden=32)
    torch_model = build_model(cfg, digits, 3)
    model = build_numpy_model(cfg, digits, 3)
    start = flat_parameters(torch_model)
    agg = AGGREGATORS[aggregator](AGGREGATORS[aggregator].Config(**({"mu": 0.5} if aggregator == "fedprox" else {})))
    sizes = digits.client_sizes()
    ids = [int(np.argmin(sizes)), int(np.argmax(sizes)), 7]
    kw = dict(local_steps=5, batch_size=8, learning_rate=0.05, momentum=momentum)
    ref = [train_client(torch_model, start, digits.shard(c), generator=client_generator(1, 2, c),
                        regulariser=agg.client_regulariser(), global_loss=agg.needs_global_loss, **kw) for c in ids]
    shards = [digits.shard_arrays(c) for c in ids]
    idx = [_batch_indices(len(y), min(8, len(y)), 5, client_generator(1, 2, c)).numpy()
           for c, (_, y) in zip(ids, shards)]
    got = train_clients_numpy(model, start.numpy(), shards, indices=idx,
                              regulariser_gradient=agg.client_regulariser_gradient(),
                              global_loss=agg.needs_global_loss, **kw)
    for a, b in zip(ref, got):
        assert b.num_examples == a.num_examples
        np.testing.assert_allclose(b.delta, a.delta, rtol=1e-4, atol=1e-6)
        assert b.train_loss == pytest.approx(a.train_loss, rel=1e-5)
        assert b.utility == pytest.approx(a.utility, rel=1e-5)
        assert (np.isnan(b.global_loss) and np.isnan(a.global_loss)) or b.global_loss == pytest.approx(
            a.global_loss, rel=1e-5)
    assert max(np.abs(a.delta).max() for a in ref) > 1e-2
    x, y = digits.test_arrays()
    assert evaluate_numpy(model, start.numpy(), x, y) == pytest.approx(evaluate(torch_model, start,
                                                                                 *digits.test_set()), rel=1e-5)


def test_batch_indices_walk_shuffled_passes():
    a = batch_indices(10, 4, 5, client_rng(1, 2, 3))
    assert a.shape == (5, 4)
    assert len(set(a[0]) | set(a[1])) == 8  # one pass: distinct examples until fewer than 4 remain
    assert np.array_equal(a, batch_indices(10, 4, 5, client_rng(1, 2, 3)))
    assert not np.array_equal(a, batch_indices(10, 4, 5, client_rng(1, 3, 3)))


def test_registry_input_kinds_match_the_classes():
    for name, entry in MODELS.items():
        assert entry.load().input_kind == entry.input_kind, name
        if entry.numpy_target:
            assert entry.load_numpy().input_kind == entry.input_kind, name


@pytest.mark.parametrize("bad,named", [
    ({"mode": "async"}, "mode 'async'"),
    ({"dataset": {"name": "shakespeare", "partition": "natural"}, "model": {"name": "charlstm"}}, "'charlstm'"),
    ({"uplink_compression": {"name": "topk", "ratio": 0.1}}, "uplink_compression.name 'topk'"),
    ({"traces": {"compute_cost": "flops"}}, "compute_cost 'flops'"),
])
def test_numpy_refused_where_unsupported(bad, named):
    with pytest.raises(ValidationError, match="client_training 'numpy'") as info:
        FLConfig.model_validate({"client_training": "numpy", **bad})
    assert named in str(info.value)


def test_numpy_accepts_fedprox_and_server_optimizers():
    for name in ("fedprox", "fedyogi", "qfedavg"):
        FLConfig.model_validate({"client_training": "numpy", "aggregator": name, "model": {"name": "logreg"}})


def test_bad_engine_setting_exits_2_naming_key_and_value(tmp_path):
    out = tmp_path / "never.h5"
    proc = subprocess.run([sys.executable, "-m", "hpcbench.fl", "--client_training", "numpy", "--mode", "async",
                           "--output", str(out)], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert "client_training 'numpy'" in proc.stderr and "mode 'async'" in proc.stderr
    assert not out.exists()


@pytest.mark.mpi
def test_job_trains_without_torch_on_any_rank(tmp_path):
    """-np 1 and -np 2: no rank imports torch, accuracy is reasonable, same model at both sizes."""
    args = ["jobs/configs/digits.yaml", "--rounds", "30", "--eval_interval", "10", "--progress", "false",
            "--client_training", "numpy", "--aggregator", "fedprox"]
    final = {}
    for n in (1, 2):
        marks = tmp_path / f"np{n}"
        marks.mkdir()
        out = tmp_path / f"np{n}.h5"
        proc = run_mpi(n, ["tests/torch_free_run.py", str(marks), *args, "--output", str(out)], timeout=120)
        assert proc.returncode == 0, proc.stderr[-3000:]
        assert sorted(p.read_text() for p in marks.iterdir()) == ["no torch"] * n
        attrs = read_attrs(out)
        assert attrs["config"]["client_training"] == "numpy"
        acc = read_table(out, "rounds")["test_accuracy"]
        assert acc[-1] > 0.85, acc
        final[n] = attrs["final_parameters_sha256"]
    assert final[1] == final[2]

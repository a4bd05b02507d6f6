"""``hpcbench train`` with a user's model and dataset (tests/byo_user_train.py), LEAF's CNN, Fashion-MNIST.

The contract is docs/byo.md's, shared with the FL runner: names resolve at validation, factories are
called and checked when the job prepares (exit 2 naming the key, the callable and what was wrong, no
results file), and the provenance records each callable and its module's SHA-256.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import numpy as np
import pytest

from hpcbench.datasets.idx import FASHION_MNIST_DIR
from hpcbench.results import read_attrs, read_table
from pydantic import ValidationError

from hpcbench.train.config import TrainConfig
from mpitools import run_mpi

HERE = Path(__file__).resolve().parent
ENV = {"PYTHONPATH": os.pathsep.join([str(HERE), os.environ.get("PYTHONPATH", "")])}
JOB = ["-m", "hpcbench.train", "--model", "byo_user_train:small_cnn", "--dataset.name", "byo_user_train:stripes",
       "--sync", "[ring]", "--warmup", "1", "--iterations", "3", "--batches_per_iter", "10", "--batch_size", "16",
       "--lr", "0.1", "--profile_steps", "1", "--progress", "false"]
FMNIST = Path(FASHION_MNIST_DIR).is_dir()


@pytest.mark.parametrize("overrides,message", [
    ({"model": "no_such_module_xyz:make", "dataset": {"name": "digits"}}, "cannot import module 'no_such_module_xyz'"),
    ({"model": "byo_user_train:nothing", "dataset": {"name": "digits"}}, "has no attribute 'nothing'"),
    ({"model": "byo_user_train:NOT_CALLABLE", "dataset": {"name": "digits"}}, "not callable"),
    ({"model": "leaf_cnn", "dataset": {"name": "byo_user_train:missing"}}, "has no attribute 'missing'"),
    ({"model": "byo_user_train:small_cnn"}, "needs a dataset section"),
    ({"model": "digits_mlp", "dataset": {"name": "fashion_mnist"}}, "trains on digits only"),
    ({"model": "leaf_cnn", "dataset": {"name": "shakespeare"}}, "gives tokens"),
    ({"model": "leaf_cnn", "model_options": {"width": 3}}, "got 'width'"),
    ({"model": "leaf_cnn", "dataset": {"name": "mnist"}}, "dataset.name"),
])
def test_bad_workloads_refused_at_validation(overrides, message, monkeypatch):
    monkeypatch.syspath_prepend(str(HERE))
    with pytest.raises(ValidationError) as err:
        TrainConfig.model_validate(overrides)
    assert message in str(err.value)


def test_workload_names(monkeypatch):
    """Without a dataset a registered model trains on its own data; leaf_cnn on any image set."""
    monkeypatch.syspath_prepend(str(HERE))
    assert TrainConfig.model_validate({"model": "digits_cnn"}).data_name() == "digits"
    assert TrainConfig.model_validate({"model": "leaf_cnn"}).data_name() == "fashion_mnist"
    cfg = TrainConfig.model_validate({"model": "leaf_cnn", "dataset": {"name": "byo_user_train:stripes"}})
    assert cfg.data_name() == "byo_user_train:stripes"


def test_leaf_cnn_is_one_network_for_both_runners():
    """The FL ``cnn`` and the training runner's ``leaf_cnn`` are core's LeafCNNNet (same parameters, same maths)."""
    import torch

    from hpcbench.fl.models.cnn import LeafCNN
    from hpcbench.models.leaf_cnn import LeafCNNNet
    from hpcbench.train.workloads.models import build_model

    class Data:
        input_shape, classes = (1, 28, 28), 10

    net = build_model("leaf_cnn", 3, Data())
    assert isinstance(net, LeafCNNNet) and issubclass(LeafCNN, LeafCNNNet)
    # LEAF's FEMNIST CNN with 10 classes: 5x5x32 + 5x5x32x64 convolutions, 3136 x 2048 and 2048 x 10 dense
    assert sum(p.numel() for p in net.parameters()) == (832 + 51264 + 3136 * 2048 + 2048 + 20490)
    fl = LeafCNN((1, 28, 28), 10)
    fl.load_state_dict(net.state_dict())
    x = torch.rand(3, 1, 28, 28)
    assert torch.equal(fl(x), net(x))


@pytest.mark.mpi
def test_user_model_and_dataset_job(tmp_path):
    out = tmp_path / "byo.h5"
    proc = run_mpi(2, [*JOB, "--model_options", "{channels: 6}", "--output", str(out)], timeout=240, env=ENV)
    assert proc.returncode == 0, proc.stderr[-3000:]
    attrs = read_attrs(out)
    assert attrs["model"] == "byo_user_train:small_cnn" and attrs["task"] == "byo_user_train:stripes"
    assert attrs["classes"] == 3
    assert attrs["parameters"] == 6 * 9 + 6 + 6 * 25 * 3 + 3           # options reached the factory
    recorded = {r["callable"]: r for r in json.loads(attrs["user_callables"])}
    digest = hashlib.sha256((HERE / "byo_user_train.py").read_bytes()).hexdigest()
    for name in ("byo_user_train:stripes", "byo_user_train:small_cnn"):
        assert recorded[name] == {"callable": name, "file": str(HERE / "byo_user_train.py"), "sha256": digest}
    acc = read_table(out, "iterations")["accuracy"]
    assert np.nanmax(acc) > 0.6                                          # three separable patterns: it learned


@pytest.mark.mpi
@pytest.mark.parametrize("flags,message", [
    (["--model", "byo_user_train:wrong_output"], "expected float logits of shape (2, 3)"),
    (["--model", "byo_user_train:not_a_module"], "returned a str; expected a torch.nn.Module"),
    (["--model", "byo_user_train:raises"], "raised RuntimeError: out of ideas"),
    (["--dataset.name", "byo_user_train:float_labels"], "y_train must be int64"),
    (["--dataset.name", "byo_user_train:flat_images"], "expected float32 or uint8 (n, F) features or (n, C, H, W)"),
    (["--dataset.name", "byo_user_train:a_list"], "returned a list; expected a mapping"),
    (["--model", "leaf_cnn", "--dataset.name", "fashion_mnist", "--dataset.path", "/nonexistent-fmnist"],
     "'/nonexistent-fmnist': no such folder of IDX files; Fashion-MNIST's files come with 'apt-get install "
     "dataset-fashion-mnist'"),
])
def test_broken_contract_exits_2(tmp_path, flags, message):
    out = tmp_path / "bad.h5"
    proc = run_mpi(2, [*JOB, *flags, "--output", str(out)], timeout=240, env=ENV)
    assert proc.returncode == 2, proc.stderr[-3000:]
    assert message in proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr
    assert not out.exists()


@pytest.mark.skipif(not FMNIST, reason=f"Fashion-MNIST not installed at {FASHION_MNIST_DIR} "
                                       f"(apt-get install dataset-fashion-mnist)")
def test_fashion_mnist_arrays():
    """The real files through core's IDX reader: 60,000 + a seeded 1,000 of the 10,000 test images, uint8."""
    from hpcbench.train.config import TrainDatasetConfig
    from hpcbench.train.workloads.arrays import load_arrays

    x, y, xt, yt = load_arrays("fashion_mnist", TrainDatasetConfig(name="fashion_mnist"), 0)
    assert x.shape == (60000, 1, 28, 28) and x.dtype == np.uint8 and y.dtype == np.int64
    assert xt.shape == (1000, 1, 28, 28) and sorted(set(y.tolist())) == list(range(10))
    assert np.array_equal(np.bincount(y), np.full(10, 6000))            # Fashion-MNIST is balanced


@pytest.mark.mpi
@pytest.mark.skipif(not FMNIST, reason=f"Fashion-MNIST not installed at {FASHION_MNIST_DIR} "
                                       f"(apt-get install dataset-fashion-mnist)")
def test_leaf_cnn_on_fashion_mnist_with_monitors(tmp_path):
    """Real compute with both of figure 8's monitors: a narrow LEAF CNN learns Fashion-MNIST in 16 steps."""
    out = tmp_path / "fm.h5"
    proc = run_mpi(2, ["-m", "hpcbench.train", "--model", "leaf_cnn", "--model_options", "{hidden_dense: 64}",
                       "--dataset.name", "fashion_mnist", "--dataset.max_test_samples", "300", "--batch_size", "16",
                       "--lr", "0.1", "--warmup", "1", "--iterations", "2", "--batches_per_iter", "8",
                       "--monitors", "[gns, variance]", "--profile_steps", "1", "--progress", "false",
                       "--output", str(out)], timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    attrs = read_attrs(out)
    assert attrs["task"] == "fashion_mnist" and attrs["dataset_path"] == FASHION_MNIST_DIR
    assert json.loads(attrs["user_callables"]) == []
    assert np.nanmax(read_table(out, "iterations")["accuracy"]) > 0.25  # chance is 0.1
    steps = read_table(out, "steps")
    assert np.isfinite(steps["gns_gns_b_simple"]).any() and np.isfinite(steps["variance_grad_variance"]).any()

"""Image models (LEAF's CNN, MobileNetV2) and their engines: batched equals sequential, auto's choice, FLOPs."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from pydantic import ValidationError

from dataset_layouts import write_idx
from hpcbench.fl.engines.batched_training import chunk_size, train_clients_batched
from hpcbench.fl.config import DatasetConfig, FLConfig, ModelConfig
from hpcbench.fl.data import build_dataset
from hpcbench.fl.models import build_model, flat_parameters
from hpcbench.fl.engines.training import client_generator, train_client


@pytest.fixture(scope="module")
def images(tmp_path_factory):
    torch.set_num_threads(1)
    folder = tmp_path_factory.mktemp("idx")
    write_idx(folder, n_train=160, n_test=20, size=12, classes=4)
    return build_dataset(DatasetConfig(name="idx", path=str(folder), num_clients=12, samples_per_client=None,
                                       partition="quantity", power=1.0), 2)


def test_leaf_cnn_shape():
    class Data:
        name, input_shape, num_classes = "femnist", (1, 28, 28), 62

    model = build_model(ModelConfig(name="cnn"), Data(), 0)
    convs = [m for m in model.modules() if isinstance(m, torch.nn.Conv2d)]
    assert [(c.out_channels, c.kernel_size) for c in convs] == [(32, (5, 5)), (64, (5, 5))]
    dense = [m for m in model.modules() if isinstance(m, torch.nn.Linear)]
    assert [(d.in_features, d.out_features) for d in dense] == [(7 * 7 * 64, 2048), (2048, 62)]
    assert sum(p.numel() for p in model.parameters()) == 6_603_710    # LEAF's FEMNIST CNN
    assert model(torch.zeros(3, 1, 28, 28)).shape == (3, 62)


@pytest.mark.parametrize("momentum", [0.0, 0.9])
def test_batched_cnn_matches_sequential(images, momentum):
    model = build_model(ModelConfig(name="cnn", hidden_dense=64), images, 5)
    start = flat_parameters(model)
    ids = list(range(images.num_clients))
    sizes = images.client_sizes()
    assert sizes.min() < 8 < sizes.max()           # several mini-batch sizes, and clients that reshuffle
    kw = dict(local_steps=4, batch_size=8, learning_rate=0.05, momentum=momentum)
    seq = [train_client(model, start, images.shard(c), generator=client_generator(1, 2, c), **kw) for c in ids]
    bat = train_clients_batched(model, start, [images.shard(c) for c in ids],
                                generators=[client_generator(1, 2, c) for c in ids], **kw)
    for a, b in zip(seq, bat):
        assert b.num_examples == a.num_examples
        np.testing.assert_allclose(b.delta, a.delta, rtol=1e-4, atol=1e-6)
        assert b.train_loss == pytest.approx(a.train_loss, rel=1e-5)
        assert b.utility == pytest.approx(a.utility, rel=1e-5)
    assert max(np.abs(a.delta).max() for a in seq) > 1e-3


def test_batched_chunks_bound_memory():
    assert chunk_size(10_000, 0.0) == 512
    assert chunk_size(6_603_710, 0.9) == (1 << 30) // (4 * 6_603_710 * 3)


def test_auto_and_engine_support():
    base = {"dataset": {"name": "idx", "path": "/nonexistent"}}
    cuda = {**base, "device": "cuda"}
    assert FLConfig.model_validate({**cuda, "model": {"name": "cnn"}}).engine == "batched"
    assert FLConfig.model_validate({**base, "model": {"name": "cnn"}}).engine == "sequential"  # CPU
    assert FLConfig.model_validate({**cuda, "model": {"name": "cnn"}, "mode": "async"}).engine == \
        "sequential"
    assert FLConfig.model_validate({**cuda, "model": {"name": "mobilenet_v2"}}).engine == "sequential"
    assert FLConfig.model_validate({**base, "model": {"name": "cnn"},
                                    "client_training": "batched"}).engine == "batched"
    with pytest.raises(ValidationError, match="buffers change in training"):
        FLConfig.model_validate({**base, "model": {"name": "mobilenet_v2"}, "client_training": "batched"})
    with pytest.raises(ValidationError, match="reads images but dataset 'digits' gives features"):
        FLConfig.model_validate({"model": {"name": "cnn"}})


def test_mobilenet_width_and_input_size(images):
    narrow = build_model(ModelConfig(name="mobilenet_v2", width=0.25, input_size=32), images, 0)
    wide = build_model(ModelConfig(name="mobilenet_v2", width=0.5, input_size=32), images, 0)
    assert sum(p.numel() for p in narrow.parameters()) < sum(p.numel() for p in wide.parameters())
    assert narrow(images.test_set()[0][:2]).shape == (2, images.num_classes)


def test_flops_price_the_cnn(images):
    from hpcbench.fl.compute_cost import forward_macs_per_sample

    model = build_model(ModelConfig(name="cnn", hidden_dense=64), images, 0)
    # conv1: 12*12*32*25, conv2: 6*6*64*32*25, dense: 3*3*64*64 + 64*4
    want = 12 * 12 * 32 * 25 + 6 * 6 * 64 * 32 * 25 + 3 * 3 * 64 * 64 + 64 * 4
    assert forward_macs_per_sample(model, images.test_set()[0][:4]) == pytest.approx(want, rel=1e-6)


def test_round_updates_refused_before_they_outgrow_memory():
    """A round's float32 updates (clients x parameters x 4 bytes) beyond the aggregator's memory: the message."""
    from hpcbench.fl.limits import round_updates_error

    sync = FLConfig(participants=1300, overcommitment=1.0,
                    dataset=DatasetConfig(num_clients=3000))
    msg = round_updates_error(sync, 6_497_162, available=20 * 10**9)
    assert msg is not None and "participants=1300, overcommitment=1.0" in msg and "33.8 GB" in msg
    assert "6,497,162 parameters" in msg and "model.name 'mlp'" in msg
    assert round_updates_error(sync, 6_497_162, available=34 * 10**9) is None
    assert round_updates_error(sync.model_copy(update={"participants": 100}), 6_497_162, 3 * 10**9) is None
    fedbuff = FLConfig(mode="async", participants=10, asynchronous={"concurrency": 2000, "buffer_size": 5})
    msg = round_updates_error(fedbuff, 10**6, available=10**9)
    assert msg is not None and "asynchronous.concurrency=2000" in msg and "8 GB" in msg


def test_fl_job_whose_round_cannot_fit_exits_2(tmp_path):
    """The real job: exit 2 naming participants and the model's size, every rank, no results file."""
    from mpitools import run_mpi

    folder = tmp_path / "idx"
    write_idx(folder, n_train=160, n_test=20, size=28, classes=4)
    out = tmp_path / "o.h5"
    # 1e5 participants of LEAF's CNN at 28x28: 2.6 TB of updates in one round
    proc = run_mpi(2, ["-m", "hpcbench.fl", "--dataset.name", "idx", "--dataset.path", str(folder),
                       "--dataset.num_clients", "100000", "--dataset.samples_per_client", "1",
                       "--participants", "100000", "--overcommitment", "1.0", "--model.name", "cnn",
                       "--traces.availability.format", "none", "--rounds", "1", "--progress", "false",
                       "--output", str(out)], timeout=240)
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert "participants=100000" in proc.stderr and "on the aggregator" in proc.stderr
    assert "Traceback" not in proc.stderr and not out.exists()

"""The readers of real layouts (hpcbench.datasets, hpcbench.fl.data) on samples written in those layouts."""

from __future__ import annotations

import gzip
import os
from pathlib import Path

import numpy as np
import pytest

from dataset_layouts import idx_bytes, write_fedscale, write_idx, write_leaf
from hpcbench.datasets.fedscale import FedScaleError, read_client_map
from hpcbench.datasets.idx import IdxError, load_idx_set, read_idx
from hpcbench.datasets.leaf import LeafError
from hpcbench.fl.config import DatasetConfig, FLConfig
from hpcbench.fl.data import build_dataset
from hpcbench.fl.data.idx import FASHION_MNIST_DIR
from hpcbench.fl.data.partition import natural_partition, quantity_partition


@pytest.mark.parametrize("gz", [True, False])
def test_idx_set_read_back(tmp_path, gz):
    written = write_idx(tmp_path, gz=gz)
    arrays = load_idx_set(tmp_path)
    for split in ("train", "test"):
        np.testing.assert_array_equal(arrays[f"x_{split}"], written[split][0])
        np.testing.assert_array_equal(arrays[f"y_{split}"], written[split][1])
        assert arrays[f"x_{split}"].dtype == np.uint8 and arrays[f"y_{split}"].dtype == np.int64


def test_idx_emnist_names_and_prefix(tmp_path):
    write_idx(tmp_path, prefix="emnist-balanced-", test_word="test", classes=47)
    write_idx(tmp_path, prefix="emnist-digits-", test_word="test", seed=1)
    with pytest.raises(IdxError, match="several"):
        load_idx_set(tmp_path)
    assert load_idx_set(tmp_path, "emnist-balanced-")["y_train"].max() == 46


def test_idx_bad_files(tmp_path):
    bad = tmp_path / "x-idx3-ubyte"
    bad.write_bytes(b"\x00\x00\x07\x03" + b"\x00" * 12)
    with pytest.raises(IdxError, match="not an IDX file"):
        read_idx(bad)
    short = tmp_path / "y-idx3-ubyte.gz"
    short.write_bytes(gzip.compress(idx_bytes(np.zeros((4, 3, 3), np.uint8))[:-1]))
    with pytest.raises(IdxError, match="need 36 bytes"):
        read_idx(short)
    with pytest.raises(IdxError, match="no train images"):
        load_idx_set(tmp_path)


def test_idx_dataset_partitions(tmp_path):
    write_idx(tmp_path, n_train=200)
    ds = build_dataset(DatasetConfig(name="idx", path=str(tmp_path), num_clients=10, samples_per_client=None,
                                     partition="quantity", power=1.2), 3)
    assert ds.input_shape == (1, 28, 28) and ds.num_classes == 10 and ds.num_clients == 10
    assert ds.client_sizes().sum() == 200 and ds.client_sizes().min() >= 1
    x, y = ds.shard_arrays(0)
    assert x.dtype == np.float32 and x.shape[1:] == (1, 28, 28) and 0 <= x.min() and x.max() <= 1
    with pytest.raises(ValueError, match="no natural client partition"):
        build_dataset(DatasetConfig(name="idx", path=str(tmp_path), partition="natural"), 3)


def test_quantity_and_natural_partitions():
    rng = np.random.default_rng(0)
    offsets, indices = quantity_partition(10_000, 200, 1.0, rng)
    sizes = np.diff(offsets)
    assert sizes.sum() == 10_000 and sizes.min() >= 1
    assert np.array_equal(np.sort(indices), np.arange(10_000))
    assert sizes.max() > 10 * np.median(sizes)     # a heavy tail, unlike an IID split's equal sizes
    offsets, indices = natural_partition(np.array([2, 0, 2, 1, 0]))
    assert offsets.tolist() == [0, 2, 3, 5] and indices.tolist() == [1, 4, 3, 0, 2]
    with pytest.raises(ValueError):
        natural_partition(np.array([0, 2]))


@pytest.mark.parametrize("kind,shape,classes", [("femnist", (1, 28, 28), 62), ("shakespeare", (80,), 81),
                                                ("sent140", (50,), 2), ("celeba", (3, 84, 84), 2)])
def test_leaf_natural_clients(tmp_path, kind, shape, classes):
    counts = write_leaf(tmp_path, kind)
    ds = build_dataset(DatasetConfig(name=f"leaf_{kind}", path=str(tmp_path), partition="natural",
                                     vocab_size=50), 1)
    assert ds.num_clients == len(counts)
    assert ds.client_sizes().tolist() == list(counts.values())     # one client per LEAF user, in file order
    assert ds.input_shape == shape and ds.num_classes == classes
    x, y = ds.test_arrays()
    assert len(x) == len(y) > 0


def test_leaf_values(tmp_path):
    write_leaf(tmp_path / "f", "femnist", users=3)
    write_leaf(tmp_path / "s", "shakespeare", users=3)
    import json

    doc = json.loads(sorted((tmp_path / "f" / "train").iterdir())[0].read_text())
    first = doc["user_data"][doc["users"][0]]
    ds = build_dataset(DatasetConfig(name="leaf_femnist", path=str(tmp_path / "f"), partition="natural"), 1)
    x, y = ds.shard_arrays(0)
    np.testing.assert_allclose(x[0].reshape(-1), first["x"][0], atol=1e-6)
    assert y[0] == first["y"][0]
    doc = json.loads(sorted((tmp_path / "s" / "train").iterdir())[0].read_text())
    first = doc["user_data"][doc["users"][0]]
    ds = build_dataset(DatasetConfig(name="leaf_shakespeare", path=str(tmp_path / "s"), partition="natural"), 1)
    x, y = ds.shard_arrays(0)
    from hpcbench.datasets.leaf import SHAKESPEARE_LETTERS

    assert "".join(SHAKESPEARE_LETTERS[i] for i in x[0]) == first["x"][0]
    assert "".join(SHAKESPEARE_LETTERS[i] for i in y[0]) == first["x"][0][1:] + first["y"][0]


def test_leaf_bad_layouts(tmp_path):
    write_leaf(tmp_path, "femnist", users=2)
    cfg = DatasetConfig(name="leaf_femnist", path=str(tmp_path), partition="natural")
    train = sorted((tmp_path / "train").iterdir())[0]
    train.write_text('{"users": ["a"], "user_data": {}}')
    with pytest.raises(LeafError, match="num_samples"):
        build_dataset(cfg, 1)
    train.write_text('{"users": ["a"], "num_samples": [2], "user_data": {"a": {"x": [[0.5]], "y": [1]}}}')
    with pytest.raises(LeafError, match="num_samples 2, 1 x"):
        build_dataset(cfg, 1)
    train.write_text('{"users": ["a"], "num_samples": [1], "user_data": {"a": {"x": [[0.5]], "y": [1]}}}')
    with pytest.raises(ValueError, match=r"expected \(n, 784\)"):
        build_dataset(cfg, 1)
    with pytest.raises(FileNotFoundError, match="LEAF folder"):
        build_dataset(DatasetConfig(name="leaf_femnist", path=str(tmp_path / "nope"), partition="natural"), 1)


def test_fedscale_layout(tmp_path):
    written = write_fedscale(tmp_path)
    clients, paths, labels = read_client_map(tmp_path / "client_data_mapping" / "train.csv")
    np.testing.assert_array_equal(clients, written["train"][0])
    np.testing.assert_array_equal(labels, written["train"][1])
    ds = build_dataset(DatasetConfig(name="fedscale", path=str(tmp_path), partition="natural", channels=1,
                                     image_size=20), 1)
    assert ds.num_clients == 12 and ds.input_shape == (1, 20, 20)
    assert ds.client_sizes().tolist() == np.bincount(written["train"][0]).tolist()
    (tmp_path / "client_data_mapping" / "test.csv").write_text("client,path,label\nf1,a.png,1\n")
    with pytest.raises(FedScaleError, match="header"):
        build_dataset(DatasetConfig(name="fedscale", path=str(tmp_path), partition="natural"), 1)
    (tmp_path / "client_data_mapping" / "test.csv").write_text(
        "client_id,sample_path,label_name,label_id\nf1,missing.png,a,1\n")
    with pytest.raises(FileNotFoundError, match="missing.png"):
        build_dataset(DatasetConfig(name="fedscale", path=str(tmp_path), partition="natural"), 1)


def test_fedscale_job_file_reads_its_data(tmp_path):
    from hpcbench.fl.fedscale_conf import translate_job_conf

    write_fedscale(tmp_path / "femnist")
    conf = [{"data_set": "femnist"}, {"data_dir": str(tmp_path / "femnist")},
            {"data_map_file": str(tmp_path / "femnist" / "client_data_mapping" / "train.csv")}]
    job = translate_job_conf(conf, "job.yml", given={"model.name": "cnn"})
    assert job.tree["dataset"] == {"name": "fedscale", "path": str(tmp_path / "femnist"), "partition": "natural",
                                   "data_map_file": str(tmp_path / "femnist" / "client_data_mapping" / "train.csv"),
                                   "samples_per_client": None}
    with pytest.raises(Exception, match="data_set"):   # no download there: refused by name, as before
        translate_job_conf([{"data_set": "femnist"}, {"data_dir": str(tmp_path / "none")}], "job.yml")


def test_fashion_mnist_missing_folder_says_how_to_get_it(tmp_path):
    with pytest.raises(FileNotFoundError, match="apt-get install dataset-fashion-mnist"):
        build_dataset(DatasetConfig(name="fashion_mnist", path=str(tmp_path / "none")), 1)


@pytest.mark.skipif(not Path(FASHION_MNIST_DIR).is_dir(),
                    reason=f"Fashion-MNIST not installed at {FASHION_MNIST_DIR} (apt-get install dataset-fashion-mnist)")
def test_fashion_mnist_real_files():
    ds = build_dataset(DatasetConfig(name="fashion_mnist", num_clients=100, samples_per_client=None,
                                     alpha=0.3), 1)
    assert ds.client_sizes().sum() == 60_000 and ds.num_classes == 10 and ds.input_shape == (1, 28, 28)
    assert np.bincount(ds._y, minlength=10).tolist() == [6000] * 10    # the set's balanced classes
    assert ds.test_arrays()[0].shape == (2000, 1, 28, 28)


def test_config_names_the_key():
    from pydantic import ValidationError

    with pytest.raises(ValidationError, match="needs path"):
        FLConfig.model_validate({"dataset": {"name": "leaf_femnist"}, "model": {"name": "cnn"}})
    with pytest.raises(ValidationError, match="samples_per_client: null"):
        DatasetConfig(name="digits", partition="quantity")


@pytest.mark.mpi
@pytest.mark.parametrize("case", ["missing", "bad_leaf"])
def test_bad_data_exits_2(tmp_path, case):
    from mpitools import run_mpi

    if case == "missing":
        flags = ["--dataset.name", "fashion_mnist", "--dataset.path", str(tmp_path / "none"), "--model.name", "cnn"]
        message = "apt-get install dataset-fashion-mnist"
    else:
        write_leaf(tmp_path / "leaf", "femnist", users=3)
        sorted((tmp_path / "leaf" / "test").iterdir())[0].write_text('{"users": []}')
        flags = ["--dataset.name", "leaf_femnist", "--dataset.path", str(tmp_path / "leaf"), "--dataset.partition",
                 "natural", "--model.name", "cnn", "--participants", "2"]
        message = "missing key(s) num_samples, user_data"
    out = tmp_path / "bad.h5"
    proc = run_mpi(2, ["-m", "hpcbench.fl", *flags, "--rounds", "1", "--progress", "false", "--output", str(out)],
                   timeout=240)
    assert proc.returncode == 2, proc.stderr[-3000:]
    assert message in proc.stdout + proc.stderr
    assert not out.exists()

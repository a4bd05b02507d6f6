"""``device:`` of the FL job's torch client engines (``cpu | cuda | auto``).

Without a GPU: the config rules (the numpy engine computes on the CPU; ``auto`` engine resolution),
``device: cuda`` exiting 2 on every rank with no results file, and ``device: cpu`` leaving the bits of
a client update unchanged. With a GPU (skipped otherwise, with the reason): a client trained on the GPU
gives the CPU's update within float32 tolerance, for the sequential and the batched engine, and a
job trains there.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from pydantic import ValidationError

from hpcbench.fl.config import DatasetConfig, FLConfig, ModelConfig
from hpcbench.fl.data import DigitsDataset
from hpcbench.fl.models import build_model, flat_parameters
from hpcbench.fl.engines.training import client_generator, train_client
from hpcbench.results import read_attrs, read_table
from mpitools import run_mpi

GPU = torch.cuda.is_available()
needs_gpu = pytest.mark.skipif(not GPU, reason="needs a GPU (CUDA torch and a visible device)")


@pytest.fixture(scope="module")
def task():
    torch.set_num_threads(1)
    ds = DigitsDataset(DatasetConfig(num_clients=20, alpha=0.3, samples_per_client=None), seed=5)
    model = build_model(ModelConfig(name="mlp", hidden=32), ds, 5)
    return ds, model, flat_parameters(model)


def test_cuda_is_not_the_numpy_engine():
    with pytest.raises(ValidationError, match="device 'cuda'"):
        FLConfig.model_validate({"client_training": "numpy", "device": "cuda"})
    assert FLConfig.model_validate({"device": "cuda"}).engine == "sequential"   # auto: a torch engine
    assert FLConfig.model_validate({"device": "auto"}).engine == "numpy"        # auto: CPU for numpy
    with pytest.raises(ValidationError, match="device"):
        FLConfig.model_validate({"device": "gpu"})


def test_cpu_device_keeps_the_bits(task):
    """On the CPU a client's update is deterministic (two identical calls, equal bits), float32 and trained
    (the bits against earlier versions are checked by the FL job tests at any world size)."""
    ds, model, start = task
    kw = dict(local_steps=5, batch_size=8, learning_rate=0.05, momentum=0.9)
    a = train_client(model, start, ds.shard(3), generator=client_generator(1, 2, 3), **kw)
    b = train_client(model, start, ds.shard(3), generator=client_generator(1, 2, 3), **kw)
    assert a.delta.dtype == np.float32 and np.array_equal(a.delta, b.delta) and np.abs(a.delta).max() > 1e-3


@pytest.mark.mpi
@pytest.mark.skipif(GPU, reason="a GPU is visible: device cuda runs here")
def test_cuda_without_a_gpu_exits_2_on_every_rank(tmp_path):
    out = tmp_path / "fl.h5"
    proc = run_mpi(2, ["-m", "hpcbench.fl", "--device", "cuda", "--rounds", "1", "--progress", "false",
                       "--output", str(out)], timeout=180)
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert "device" in proc.stderr and "'cuda'" in proc.stderr
    assert not out.exists()


@needs_gpu
@pytest.mark.parametrize("engine", ["sequential", "batched"])
def test_a_client_on_the_gpu_gives_the_cpu_update(task, engine):
    import copy

    from hpcbench.fl.engines.batched_training import train_clients_batched

    ds, model, start = task
    gpu_model = copy.deepcopy(model).to("cuda")
    ids = [0, 1, 2, 7]
    kw = dict(local_steps=6, batch_size=8, learning_rate=0.05, momentum=0.9)
    if engine == "sequential":
        cpu = [train_client(model, start, ds.shard(c), generator=client_generator(1, 2, c), **kw) for c in ids]
        gpu = [train_client(gpu_model, start, ds.shard(c), generator=client_generator(1, 2, c), **kw) for c in ids]
    else:
        gens = lambda: [client_generator(1, 2, c) for c in ids]   # noqa: E731 - fresh generators per engine
        cpu = train_clients_batched(model, start, [ds.shard(c) for c in ids], generators=gens(), **kw)
        gpu = train_clients_batched(gpu_model, start, [ds.shard(c) for c in ids], generators=gens(), **kw)
    for a, b in zip(cpu, gpu):
        assert isinstance(b.delta, np.ndarray) and b.num_examples == a.num_examples
        np.testing.assert_allclose(b.delta, a.delta, rtol=1e-3, atol=1e-5)
        assert b.train_loss == pytest.approx(a.train_loss, rel=1e-4)


@needs_gpu
@pytest.mark.mpi
def test_a_job_trains_its_clients_on_the_gpu(tmp_path):
    out = tmp_path / "fl.h5"
    proc = run_mpi(2, ["-m", "hpcbench.fl", "--device", "cuda", "--rounds", "20", "--eval_interval", "10",
                       "--progress", "false", "--output", str(out)], timeout=240)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert read_attrs(out)["config"]["device"] == "cuda"
    acc = read_table(out, "rounds")["test_accuracy"]
    assert np.nanmax(acc) > 0.6

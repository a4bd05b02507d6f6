"""The task fl-bench hands to the peer simulators (hpcbench.bench.peer_task, peers) and the pfl side (pfl_compare).

The peers' own runs need their Pythons: set HPCBENCH_PFL_PYTHON (a Python with pfl and torch) and
HPCBENCH_FLOWER_PYTHON (one with flwr[simulation]) to run them; without, those tests say they were skipped.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from hpcbench.bench import peer_task
from hpcbench.bench.peers import write_job_task
from hpcbench.bench.pfl_compare import parse_procs, pfl_command, resolve_python
from hpcbench.fl.config import FLConfig
from hpcbench.fl.data import build_dataset
from hpcbench.fl.data.idx import FASHION_MNIST_DIR
from hpcbench.fl.engines.training import client_generator, train_client
from hpcbench.fl.models import build_model, flat_parameters
from hpcbench.fl.models.cnn import LeafCNN
from hpcbench.fl.models.mlp import MLP
from hpcbench.runtime.errors import InputError
from mpitools import ROOT

SMALL = {"dataset": {"num_clients": 12, "samples_per_client": 20}, "participants": 12, "local_steps": 5}


@pytest.mark.parametrize("name,hpc", [("mlp", lambda: MLP(64, 32, 10)), ("logreg", lambda: MLP(64, 0, 10)),
                                      ("cnn", lambda: LeafCNN((1, 28, 28), 10, 128))])
def test_peer_models_are_hpcbench_models(name, hpc):
    torch.manual_seed(3)
    ref = hpc()
    shape = [1, 28, 28] if name == "cnn" else [64]
    spec = {"name": name, "hidden": 32, "hidden_dense": 128, "input_shape": shape, "num_classes": 10}
    state = {k: v.numpy() for k, v in ref.state_dict().items()}
    peer = peer_task.build_model(spec, state)
    assert [(k, v.shape) for k, v in peer.state_dict().items()] == [(k, v.shape) for k, v in ref.state_dict().items()]
    x = torch.rand(4, *shape)
    assert torch.equal(peer(x), ref(x))
    with pytest.raises(ValueError, match="model.name 'resnet'"):
        peer_task.build_model({**spec, "name": "resnet"})


def test_peer_local_training_is_the_sequential_engines():
    """Same shuffles (seeds) and mini-batch walk: Flower's torch.optim.SGD loop gives train_client's update."""
    from hpcbench.bench.flower_baseline import _train

    cfg = FLConfig.model_validate({**SMALL, "dataset": {"num_clients": 12, "samples_per_client": 7}})
    ds = build_dataset(cfg.dataset, cfg.seed)
    model = build_model(cfg.model, ds, cfg.seed)
    start = flat_parameters(model)
    spec = {**cfg.model.model_dump(), "input_shape": [64], "num_classes": 10}
    for cid in (0, 5):
        for a, b in zip(client_generator(1, 2, cid).get_state(), peer_task.client_generator(1, 2, cid).get_state()):
            assert a == b
        ref = train_client(model, start, ds.shard(cid), 5, 4, 0.1, 0.0, client_generator(1, 2, cid))
        peer = peer_task.build_model(spec)
        torch.nn.utils.vector_to_parameters(start.clone(), peer.parameters())
        x, y = ds.shard_arrays(cid)
        _train(peer, np.array(x), np.array(y), 5, 4, 0.1, peer_task.client_generator(1, 2, cid))
        delta = (flat_parameters(peer) - start).numpy()
        np.testing.assert_allclose(delta, ref.delta, rtol=1e-4, atol=1e-6)


def _check_roundtrip(config: dict, folder: Path) -> None:
    write_job_task(config, folder)
    cfg = FLConfig.model_validate(config)
    ds = build_dataset(cfg.dataset, cfg.seed)
    task = peer_task.load_task(folder)
    assert task.num_clients == ds.num_clients == task.settings["clients"]
    assert task.settings["participants"] == cfg.participants
    for cid in range(ds.num_clients):
        x, y = task.client_arrays(cid)
        ref_x, ref_y = ds.shard_arrays(cid)
        assert x.dtype == np.float32 and np.array_equal(x, ref_x) and np.array_equal(y, ref_y)
    for a, b in zip(task.test_arrays(), ds.test_arrays()):
        assert np.array_equal(a, b)
    initial = build_model(cfg.model, ds, cfg.seed).state_dict()
    assert list(task.initial) == list(initial)
    assert all(np.array_equal(task.initial[k], v.numpy()) for k, v in initial.items())
    with pytest.raises(FileExistsError):
        write_job_task(config, folder)


def test_task_folder_holds_the_jobs_clients_and_weights(tmp_path):
    _check_roundtrip(FLConfig.model_validate(SMALL).model_dump(), tmp_path / "digits")
    (tmp_path / "bad").mkdir()
    (tmp_path / "bad" / "task.json").write_text(json.dumps({"format": 99}))
    with pytest.raises(ValueError, match="format 99"):
        peer_task.load_task(tmp_path / "bad")


@pytest.mark.skipif(not Path(FASHION_MNIST_DIR).is_dir(), reason="Fashion-MNIST's IDX files are not installed "
                                                                   "(apt-get install dataset-fashion-mnist)")
def test_task_folder_of_fashion_mnist_cnn(tmp_path):
    config = FLConfig.model_validate({"dataset": {"name": "fashion_mnist", "num_clients": 50, "samples_per_client": None,
                                                  "max_test_samples": 100},
                                      "model": {"name": "cnn", "hidden_dense": 64}, "participants": 5}).model_dump()
    _check_roundtrip(config, tmp_path / "fmnist")
    task = peer_task.load_task(tmp_path / "fmnist")
    assert task.arrays["x_pool"].dtype == np.uint8 and task.settings["model"]["input_shape"] == [1, 28, 28]


def test_pfl_procs_and_python_are_checked():
    assert parse_procs("1,2") == [1, 2]
    for bad in ("0", "2,2", "x", ""):
        with pytest.raises(InputError, match="--pfl-procs"):
            parse_procs(bad)
    assert resolve_python("none") is None
    with pytest.raises(InputError, match="--pfl: '/bin/false' cannot import pfl and torch"):
        resolve_python("/bin/false")
    cmd = pfl_command("py", 2, Path("t"), 3, Path("o.json"))
    assert cmd[:8] == ["py", "-m", "torch.distributed.run", "--standalone", "--nnodes", "1", "--nproc_per_node", "2"]
    assert pfl_command("py", 1, Path("t"), 3, Path("o.json"))[:3] == ["py", "-m", "hpcbench.bench.pfl_baseline"]


def test_fl_bench_refuses_bad_peer_flags_before_any_run(tmp_path):
    small = ("--np", "1", "--clients", "12", "--participants", "6", "--rounds", "2", "--warmup", "1",
             "--registry-clients", "0", "--flower", "none")
    for bad, word in ((["--pfl-procs", "0"], "--pfl-procs"), (["--pfl", "/bin/false"], "--pfl"),
                      (["--keep", str(tmp_path)], "--keep"),
                      (["--preset", "fmnist-cnn", "--client-training", "numpy"], "client_training")):
        proc = subprocess.run([sys.executable, "-m", "hpcbench.cli", "fl-bench", *small, *bad], capture_output=True,
                              text=True, timeout=600, cwd=str(ROOT), stdin=subprocess.DEVNULL)
        assert proc.returncode == 2 and word in proc.stderr and "running" not in proc.stdout, proc.stderr[-2000:]


def _peer_python(var: str) -> str:
    python = os.environ.get(var)
    if not python:
        pytest.skip(f"{var} is not set (a Python with the peer installed; docs/fl.md says how to make one)")
    return python


def _hpcbench_job(tmp_path: Path) -> tuple[dict, dict]:
    """A 2-round sequential job where every client takes part in every round; its config and evaluations."""
    from hpcbench.results import read_attrs, read_table

    out = tmp_path / "job.h5"
    proc = subprocess.run([sys.executable, "-m", "hpcbench.fl", "--client_training", "sequential", "--rounds", "2",
                           "--participants", "12", "--dataset.num_clients", "12", "--dataset.samples_per_client",
                           "20", "--overcommitment", "1", "--traces.availability.format", "none",
                           "--traces.availability.path", "bundled", "--eval_interval", "1", "--local_steps", "5",
                           "--progress", "false", "--output", str(out)],
                          capture_output=True, text=True, timeout=900, cwd=str(ROOT), stdin=subprocess.DEVNULL)
    assert proc.returncode == 0, proc.stderr[-2000:]
    rounds = read_table(out, "rounds")
    assert list(rounds["participants"]) == [12, 12]
    return read_attrs(out)["config"], {int(r): float(l) for r, l in zip(rounds["round"], rounds["test_loss"])}


def _peer_env(tmp_path: Path) -> dict:
    root = tmp_path / "hpcbench-only"
    root.mkdir(exist_ok=True)
    (root / "hpcbench").symlink_to(ROOT / "hpcbench", target_is_directory=True)
    return dict(os.environ, PYTHONPATH=str(root), FLWR_TELEMETRY_ENABLED="0")


def _peer_losses(out: Path) -> dict:
    return {int(r): float(loss) for r, _, loss in json.loads(out.read_text())["evaluations"]}


def test_pfl_trains_the_same_model_as_hpcbench(tmp_path):
    """Same clients (all of them each round), weights, shuffles and FedAvg: the same test loss after each round."""
    python = _peer_python("HPCBENCH_PFL_PYTHON")
    config, losses = _hpcbench_job(tmp_path)
    write_job_task(config, tmp_path / "task")
    env = _peer_env(tmp_path)
    for procs in (1, 2):
        out = tmp_path / f"pfl-{procs}.json"
        proc = subprocess.run(pfl_command(python, procs, tmp_path / "task", 2, out), capture_output=True, text=True,
                              timeout=900, env=env, stdin=subprocess.DEVNULL)
        assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
        got = _peer_losses(out)
        assert sorted(got) == [1, 2]
        for r, loss in losses.items():
            assert got[r] == pytest.approx(loss, rel=1e-4), (procs, r)


def test_flower_trains_the_same_model_as_hpcbench(tmp_path):
    python = _peer_python("HPCBENCH_FLOWER_PYTHON")
    config, losses = _hpcbench_job(tmp_path)
    write_job_task(config, tmp_path / "task")
    out = tmp_path / "flower.json"
    proc = subprocess.run([python, "-m", "hpcbench.bench.flower_baseline", "--task", str(tmp_path / "task"),
                           "--rounds", "2", "--json", str(out)], capture_output=True, text=True, timeout=900,
                          env=_peer_env(tmp_path), stdin=subprocess.DEVNULL)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    got = _peer_losses(out)
    for r, loss in losses.items():
        assert got[r] == pytest.approx(loss, rel=1e-4), r


def test_a_peer_that_reports_a_crash_and_hangs_is_ended(tmp_path):
    """Flower's simulation can log that its engine crashed and never return: the tree is ended, not waited on."""
    import time

    from hpcbench.bench.peers import run_tree

    script = "import time; print('Simulation Runtime crashed', flush=True); time.sleep(600)"
    t0 = time.monotonic()
    rc, sampler = run_tree([sys.executable, "-c", script], tmp_path / "log", dict(os.environ), 0.2,
                           crashed="Simulation Runtime crashed", grace_s=1.0)
    assert rc < 0 and time.monotonic() - t0 < 120 and sampler.samples
    rc, _ = run_tree([sys.executable, "-c", "print('fine')"], tmp_path / "log2", dict(os.environ), 0.2,
                     crashed="Simulation Runtime crashed", grace_s=1.0)
    assert rc == 0 and (tmp_path / "log2").read_text().strip() == "fine"

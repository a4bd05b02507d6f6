"""The pipeline's loss and gradients equal the unsplit model's, at any stage count (= world size)."""

from __future__ import annotations

import copy

import numpy as np
import pytest
import torch

from hpcbench.allocation.even import even_bounds
from hpcbench.collectives.transport import Transport
from hpcbench.pipeline.config import ModelConfig
from hpcbench.pipeline.model import build_layers, synthetic_batch
from hpcbench.pipeline.stage import Stage

CFG = ModelConfig(layers=4, hidden=16, heads=2, seq_len=6, vocab=50, classes=3)
N_LAYERS = CFG.layers + 3


def _skewed(p: int) -> np.ndarray:
    """Stage 0 gets as many layers as it can (the others one each)."""
    return np.concatenate([[0], np.arange(N_LAYERS - p + 1, N_LAYERS + 1)])


@pytest.mark.parametrize("schedule", ["gpipe", "1f1b"])
@pytest.mark.parametrize("split", ["even", "skewed"])
@pytest.mark.parametrize("m", [1, 3])
def test_loss_and_gradients_equal_unsplit(comm, schedule, split, m):
    torch.set_num_threads(1)
    p, k = comm.size, comm.rank
    bounds = even_bounds(N_LAYERS, p) if split == "even" else _skewed(p)
    layers = build_layers(CFG, seed=3)
    reference = torch.nn.Sequential(*copy.deepcopy(layers))
    mb = 2
    ids, labels = synthetic_batch(CFG, m * mb, seed=3, step=1)
    want = sum(torch.nn.functional.cross_entropy(reference(ids[i * mb:(i + 1) * mb]), labels[i * mb:(i + 1) * mb])
               for i in range(m)) / m
    want.backward()
    fwd, bwd = Transport(comm.Dup()), Transport(comm.Dup())
    mine = layers[bounds[k]:bounds[k + 1]]
    stage = Stage(CFG, mine, int(bounds[k]), int(bounds[k + 1]), k, p, mb, fwd, bwd)
    rec = stage.run_iteration(ids if k == 0 else None, labels if k == p - 1 else None, m, schedule)
    if k == p - 1:
        assert rec.loss == pytest.approx(want.item(), rel=1e-5, abs=1e-6)
    for j in range(bounds[k], bounds[k + 1]):
        for (name, got), exp in zip(layers[j].named_parameters(), reference[j].parameters()):
            torch.testing.assert_close(got.grad, exp.grad, rtol=1e-4, atol=1e-6,
                                       msg=lambda s: f"layer {j} {name}: {s}")
    assert [a[0] for a in rec.actions].count("F") == m
    fwd.comm.Free()
    bwd.comm.Free()


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a GPU (CUDA torch and a visible device)")
@pytest.mark.parametrize("schedule", ["gpipe", "1f1b"])
def test_stages_on_the_gpu_equal_the_unsplit_model(comm, schedule):
    """Every stage's layers on its GPU (ranks share it round robin), activations host-staged over MPI."""
    from hpcbench.runtime.device import select_device

    device = select_device(comm, "cuda")
    p, k, m, mb = comm.size, comm.rank, 3, 2
    bounds = even_bounds(N_LAYERS, p)
    layers = build_layers(CFG, seed=3)
    reference = torch.nn.Sequential(*copy.deepcopy(layers)).to(device.torch)
    ids, labels = synthetic_batch(CFG, m * mb, seed=3, step=1)
    dids, dlabels = ids.to(device.torch), labels.to(device.torch)
    want = sum(torch.nn.functional.cross_entropy(reference(dids[i * mb:(i + 1) * mb]), dlabels[i * mb:(i + 1) * mb])
               for i in range(m)) / m
    want.backward()
    fwd, bwd = Transport(comm.Dup()), Transport(comm.Dup())
    stage = Stage(CFG, layers[bounds[k]:bounds[k + 1]], int(bounds[k]), int(bounds[k + 1]), k, p, mb, fwd, bwd,
                  device=device)
    rec = stage.run_iteration(ids if k == 0 else None, labels if k == p - 1 else None, m, schedule)
    if k == p - 1:
        assert rec.loss == pytest.approx(want.item(), rel=1e-4, abs=1e-5)
    for j in range(bounds[k], bounds[k + 1]):
        for (name, got), exp in zip(layers[j].named_parameters(), reference[j].parameters()):
            assert got.is_cuda
            torch.testing.assert_close(got.grad, exp.grad, rtol=1e-3, atol=1e-5,
                                       msg=lambda s: f"layer {j} {name}: {s}")
    fwd.comm.Free()
    bwd.comm.Free()

"""The CPU sparse optimizer and staleness 1 in the training runner (any world size 1..4).

With plain SGD the sparse optimizer fed by the compressed allreduce's sparse result trains the model the dense
path trains; ``staleness: 0`` is the synchroniser without the key, bit for bit; ``staleness: 1`` follows the
update rule of :class:`hpcbench.sync.compressed.CompressedSync` (delayed SGD on the global batch).
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from hpcbench.runtime.dilation import NO_DILATION
from hpcbench.sync import get
from hpcbench.train.steps.context import BatchState
from hpcbench.train.workloads.digits import DigitsTask
from hpcbench.train.workloads.models import build_model
from hpcbench.train.steps.profile import ComputeProfile
from hpcbench.train.steps.worker import Worker

BATCH, LR = 8, 0.1
TOPK = {"name": "topk", "ratio": 0.1}


@pytest.fixture(scope="module")
def arrays():
    return DigitsTask.load(0)


def _train(comm, arrays, steps, **opts):
    """Parameters after ``steps`` steps of the digits MLP (2000-byte buckets) under ``compressed`` with
    ``opts``, the last step's update applied; and the parameters after each step."""
    torch.set_num_threads(1)
    cls = get("compressed")
    sync = cls(comm, None, cls.Config(**opts), bucket_bytes=2000, seed=0)
    model = build_model("digits_mlp", 0)
    numels = tuple(p.numel() for p in model.parameters())
    state = BatchState((BATCH,) * comm.size, LR, comm.rank)
    worker = Worker(model, sync, ComputeProfile(0.0, 0.0, 0.0, np.zeros(len(numels)), numels), state, 2000, True,
                    NO_DILATION)
    data = DigitsTask(0, comm.rank, comm.size, arrays)
    seen = []
    try:
        assert len(worker.plan.buckets) > 1
        for t in range(steps):
            rec = worker.step(t, data.take(t * BATCH * comm.size, state.sizes))
            assert np.isfinite(rec.loss) and rec.step_s > 0
            seen.append(torch.cat([p.detach().reshape(-1) for p in model.parameters()]).clone())
        worker.flush()
        return torch.cat([p.detach().reshape(-1) for p in model.parameters()]).clone(), seen
    finally:
        worker.close()
        sync.close()


def test_sparse_sgd_fed_by_the_sparse_allreduce_trains_the_dense_path_model(comm, arrays):
    dense, _ = _train(comm, arrays, 3, compressor=TOPK)
    sparse, _ = _train(comm, arrays, 3, compressor=TOPK, optimizer={"name": "sgd"})
    assert not torch.equal(dense, build_flat())             # it trained
    # x - lr * (sum / p) on the touched elements against torch's SGD on the densified mean: float rounding only
    torch.testing.assert_close(sparse, dense, rtol=1e-6, atol=1e-7)


def build_flat():
    return torch.cat([p.detach().reshape(-1) for p in build_model("digits_mlp", 0).parameters()])


def test_staleness_0_is_the_synchroniser_without_the_key_bit_for_bit(comm, arrays):
    for extra in ({}, {"optimizer": {"name": "sgd", "momentum": 0.9}}):
        a, _ = _train(comm, arrays, 3, compressor=TOPK, **extra)
        b, _ = _train(comm, arrays, 3, compressor=TOPK, staleness=0, **extra)
        assert torch.equal(a, b), extra


def test_staleness_1_is_delayed_sgd_on_the_global_batch(comm, arrays):
    """``w_1 = w_0`` and ``w_{t+1} = w_t - lr * g(w_{t-1})``, ``g`` the global batch's gradient (dense ring: the
    compressor ``none``), the last step's update applied at the end."""
    steps = 4
    got, seen = _train(comm, arrays, steps, staleness=1)
    assert torch.equal(seen[0], build_flat())             # step 0's update waits for step 1's backward
    model = build_model("digits_mlp", 0)
    params = list(model.parameters())
    data = DigitsTask(0, 0, 1, arrays)
    pending = None
    for t in range(steps):
        idx = torch.from_numpy(data.stream(t * BATCH * comm.size, BATCH * comm.size))
        loss = torch.nn.functional.cross_entropy(model(data.x_train[idx]), data.y_train[idx])
        grads = torch.autograd.grad(loss, params)
        with torch.no_grad():
            if pending is not None:
                for p, g in zip(params, pending):
                    p.sub_(LR * g)
        pending = grads
    with torch.no_grad():
        for p, g in zip(params, pending):
            p.sub_(LR * g)
    want = torch.cat([p.detach().reshape(-1) for p in params])
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-6)
    spread = comm.allreduce(float((got - torch.from_numpy(comm.bcast(got.numpy(), root=0))).abs().max()),
                            op=__import__("mpi4py").MPI.MAX)
    assert spread == 0.0                                    # every replica the same model


def test_staleness_1_with_the_sparse_optimizer_trains_and_replicas_agree(comm, arrays):
    got, seen = _train(comm, arrays, 4, compressor=TOPK, optimizer={"name": "adam"}, staleness=1)
    assert torch.equal(seen[0], build_flat()) and not torch.equal(seen[1], seen[0])
    ref = torch.from_numpy(comm.bcast(got.numpy(), root=0))
    assert comm.allreduce(int(not torch.equal(got, ref))) == 0

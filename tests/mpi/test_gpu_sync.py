"""Synchronisers on GPU tensors (any world size; ranks share the visible GPUs round robin).

Each synchroniser that can run here trains the same model as one process on
the global batch: hpcbench's own algorithms and the model averaging through
host staging, DDP over gloo on CUDA buckets, DDP over NCCL where every rank
has a GPU of its own (NCCL refuses two ranks on one GPU: skipped with that
reason). Without a GPU the whole file is skipped with the reason; the
staging itself is tested on CPU tensors in ``test_train_sync.py``.
"""

from __future__ import annotations

import pytest
import torch

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(),
                                reason="needs a GPU (CUDA torch and a visible device)")

BATCH, STEPS, LR = 8, 3, 0.1


@pytest.fixture(scope="module")
def arrays():
    from hpcbench.train.workloads.digits import DigitsTask

    return DigitsTask.load(0)


def _train(comm, arrays, name, device):
    import numpy as np

    from hpcbench.runtime.dilation import NO_DILATION
    from hpcbench.sync import Unavailable, build
    from hpcbench.train.steps.context import BatchState
    from hpcbench.train.workloads.digits import DigitsTask
    from hpcbench.train.workloads.models import build_model
    from hpcbench.train.steps.profile import ComputeProfile
    from hpcbench.train.steps.worker import Worker

    try:
        sync = build(name, comm, None, bucket_bytes=2000, device=device)
    except Unavailable as exc:
        pytest.skip(str(exc))
    model = build_model("digits_mlp", 0).to(device.torch)
    numels = tuple(p.numel() for p in model.parameters())
    prof = ComputeProfile(0.0, 0.0, 0.0, np.zeros(len(numels)), numels)
    state = BatchState((BATCH,) * comm.size, LR, comm.rank)
    data = DigitsTask(0, comm.rank, comm.size, arrays, device.torch)
    worker = Worker(model, sync, prof, state, 2000, True, NO_DILATION, device=device,
                    host_staging=sync.averages != "wrapped")
    try:
        for t in range(STEPS):
            rec = worker.step(t, data.take(t * BATCH * comm.size, state.sizes))
            assert rec.step_s > 0
        return [p.detach().cpu() for p in model.parameters()]
    finally:
        worker.close()
        sync.close()


@pytest.mark.parametrize("name", ["ring", "auto", "mpi", "ddp", "nccl"])
def test_gpu_synchroniser_matches_one_process_on_the_global_batch(comm, arrays, name):
    from hpcbench.runtime.device import select_device
    from hpcbench.train.workloads.digits import DigitsTask
    from hpcbench.train.workloads.models import build_model

    device = select_device(comm, "cuda")
    got = _train(comm, arrays, name, device)
    model = build_model("digits_mlp", 0).to(device.torch)
    data = DigitsTask(0, 0, 1, arrays, device.torch)
    opt = torch.optim.SGD(model.parameters(), lr=LR)
    for t in range(STEPS):
        x, y = data.take(t * BATCH * comm.size, (BATCH * comm.size,))
        torch.nn.functional.cross_entropy(model(x), y).backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
    for g, w in zip(got, model.parameters()):
        torch.testing.assert_close(g, w.detach().cpu(), rtol=1e-4, atol=1e-5)


def test_cuda_timing_waits_for_the_device():
    """A host interval read through the device clock covers the kernels it queued (CUDA events time them)."""
    from hpcbench.runtime.device import pick_device
    from hpcbench.runtime.devicetime import DeviceClock

    device = pick_device("cuda", 0, 1, torch.cuda.device_count())
    clock = DeviceClock(device)
    a = torch.randn(4096, 4096, device=device.torch)
    t0 = clock.now()
    m0 = clock.mark()
    for _ in range(50):
        a = a @ a / 64
    m1 = clock.mark()
    waited = clock.now() - t0
    on_device = clock.seconds(m0, m1)
    assert on_device > 0 and waited >= 0.9 * on_device, (waited, on_device)

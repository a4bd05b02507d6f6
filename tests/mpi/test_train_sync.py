"""Gradient synchronisers inside an MPI job (any world size 1..4).

Every allreduce synchroniser trains the same model as one process on the
concatenated batch (exactly at world size 1, within float reassociation
otherwise); ``compressed`` applies exactly the dense allreduce of the
decompressed contributions; SMA and pair averaging converge on the digits.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from hpcbench.runtime.dilation import NO_DILATION
from hpcbench.sync import Unavailable, get, names
from hpcbench.train.steps.context import BatchState
from hpcbench.train.workloads.digits import DigitsTask
from hpcbench.train.workloads.models import build_model
from hpcbench.train.steps.profile import ComputeProfile
from hpcbench.train.steps.worker import Worker

BATCH, STEPS, LR = 8, 3, 0.1
ALLREDUCE = [n for n in names() if n not in ("sma", "pair")]   # every gradient-averaging synchroniser


@pytest.fixture(scope="module")
def arrays():
    return DigitsTask.load(0)


def _profile(model) -> ComputeProfile:
    numels = tuple(p.numel() for p in model.parameters())
    return ComputeProfile(0.0, 0.0, 0.0, np.zeros(len(numels)), numels)


def _worker(name, comm, arrays, model="digits_mlp", bucket_bytes=2000, lr=LR, order=None, seed=0,
            host_staging=False, **opts):
    torch.set_num_threads(1)
    try:
        sync = get(name)(comm, None, get(name).Config(**opts), bucket_bytes=bucket_bytes, seed=seed)
    except Unavailable as exc:
        pytest.skip(str(exc))
    m = build_model(model, 0)
    data = DigitsTask(0, comm.rank, comm.size, arrays)
    state = BatchState((BATCH,) * comm.size, lr, comm.rank)
    return (Worker(m, sync, _profile(m), state, bucket_bytes, True, NO_DILATION, order, host_staging=host_staging),
            Feed(data, state))


class Feed:
    """The loop's part: each step, this worker's slice of the next global batch (sizes from the state)."""

    def __init__(self, data, state):
        self.data, self.state, self.position = data, state, 0

    def __call__(self):
        batch = self.data.take(self.position, self.state.sizes)
        self.position += self.state.global_batch
        return batch


def _reference(comm, arrays, steps=STEPS):
    """One process training on every worker's batch at once (the global batch)."""
    model = build_model("digits_mlp", 0)
    data = DigitsTask(0, 0, 1, arrays)
    opt = torch.optim.SGD(model.parameters(), lr=LR)
    for t in range(steps):
        idx = torch.from_numpy(data.stream(t * BATCH * comm.size, BATCH * comm.size))
        loss = torch.nn.functional.cross_entropy(model(data.x_train[idx]), data.y_train[idx])
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
    return [p.detach() for p in model.parameters()]


@pytest.mark.parametrize("name,opts", [(n, {}) for n in ALLREDUCE] + [("ddp", {"gradient_as_bucket_view": True})])
def test_allreduce_synchroniser_matches_one_process_on_the_global_batch(comm, arrays, name, opts):
    worker, feed = _worker(name, comm, arrays, **opts)
    try:
        if worker.buckets is not None:
            assert len(worker.plan.buckets) > 1            # several buckets, started during backward
        for t in range(STEPS):
            rec = worker.step(t, feed())
            assert rec.step_s > 0 and np.isfinite(rec.loss)
        got = [p.detach() for p in worker.model.parameters()]
    finally:
        worker.close()
        worker.sync.close()
    want = _reference(comm, arrays)
    for g, w in zip(got, want):
        if comm.size == 1:
            assert torch.equal(g, w), name
        else:
            torch.testing.assert_close(g, w, rtol=1e-5, atol=1e-6)
    # every replica holds the same model
    flat = torch.cat([g.reshape(-1) for g in got]).numpy()
    spread = comm.allreduce(float(np.abs(flat - comm.bcast(flat, root=0)).max()), op=__import__("mpi4py").MPI.MAX)
    assert spread <= 1e-6


@pytest.mark.parametrize("order", [None, [1, 0]])
def test_backward_accumulates_into_the_buckets_after_the_first_step(comm, arrays, order):
    """The .grad views of the buckets stay between steps (zeroed, not dropped): from the second step on,
    backward adds every gradient into its bucket slot in place and the hook copies nothing (FIFO and the
    priority schedule); that the model is still the reference's is the test above."""
    worker, feed = _worker("ring", comm, arrays, order=order)
    b = worker.buckets
    assert len(b.flats) == 2
    slots = [v.data_ptr() for v in b.views(worker.params)]
    in_place: list[list[bool]] = []
    add = b.add_grad

    def add_grad(i, g):
        in_place[-1].append(g.data_ptr() == slots[i])
        add(i, g)

    b.add_grad = add_grad
    try:
        for t in range(STEPS):
            in_place.append([])
            worker.step(t, feed())
            if order is None:
                assert all(p.grad.data_ptr() == q and not p.grad.any() for p, q in zip(worker.params, slots))
        worker.flush()
    finally:
        worker.close()
        worker.sync.close()
    assert [len(s) for s in in_place] == [len(worker.params)] * STEPS
    assert not any(in_place[0]) and all(in_place[1]) and all(in_place[2])


@pytest.mark.parametrize("name,opts", [("ring", {}), ("mpi", {}), ("sma", {}), ("pair", {}),
                                       ("compressed", {"compressor": {"name": "topk", "ratio": 0.1}})])
def test_host_staging_on_cpu_tensors_is_the_direct_path_bit_for_bit(comm, arrays, name, opts):
    """Each bucket (or model vector) copied to a host buffer, reduced there, copied back: the same model."""
    from hpcbench.sync.staged import HostStaged

    finals = []
    for staged in (False, True):
        worker, feed = _worker(name, comm, arrays, host_staging=staged, **opts)
        assert isinstance(worker.sync, HostStaged) == staged
        try:
            norms = [worker.step(t, feed()).local_sq_norm for t in range(STEPS)]
            finals.append(([p.detach().clone() for p in worker.model.parameters()], norms))
        finally:
            worker.close()
            worker.sync.close()
    (direct, n0), (staged, n1) = finals
    assert all(torch.equal(a, b) for a, b in zip(direct, staged)), name
    np.testing.assert_array_equal(n0, n1)


def test_local_squared_norm_is_the_norm_before_synchronisation(comm, arrays):
    worker, feed = _worker("ring", comm, arrays)
    try:
        model_copy = build_model("digits_mlp", 0)
        x, y = batch = feed()
        torch.nn.functional.cross_entropy(model_copy(x), y).backward()
        want = sum(float(p.grad.double().pow(2).sum()) for p in model_copy.parameters())
        rec = worker.step(0, batch)
    finally:
        worker.close()
    assert rec.local_sq_norm == pytest.approx(want, rel=1e-6)


@pytest.mark.parametrize("compressor,opts", [("topk", {"ratio": 0.1}), ("qsgd", {})])
def test_compressed_is_the_dense_allreduce_of_the_decompressed_contributions(comm, compressor, opts):
    """Two steps (error feedback in play): the bucket becomes sum_r D(C(g_r + e_r)) / p."""
    from hpcbench.compress import registry
    from hpcbench.compress.memory import ErrorFeedback

    section = {"name": compressor, "ratio": opts.get("ratio")}
    sync = get("compressed")(comm, None, get("compressed").Config(compressor=section), seed=3)
    ref = registry.build(compressor, ratio=opts.get("ratio"), seed=3 * 1009 + comm.rank)
    mem = ErrorFeedback()
    gen = torch.Generator().manual_seed(comm.rank)
    for step in range(2):
        g = torch.randn(3000, generator=gen)
        acc, payload, ctx = mem.compress(g.clone(), "bucket0", ref)
        decoded = ref.decompress(payload, ctx).reshape(-1).clone()
        mem.update(acc, "bucket0", ref, payload, ctx)
        everyone = comm.allgather(decoded.numpy())
        want = torch.from_numpy(np.sum(everyone, axis=0, dtype=np.float32)) / comm.size
        flat = g.clone()
        sync.wait(sync.start(flat, 0))
        if comm.size == 1:
            assert torch.equal(flat, want)
        else:
            torch.testing.assert_close(flat, want, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("name", ["sma", "pair"])
def test_model_averaging_converges_on_digits(comm, arrays, name):
    worker, feed = _worker(name, comm, arrays, lr=0.3, seed=1)
    try:
        first = [worker.step(t, feed()).loss for t in range(5)]
        for t in range(5, 200):
            rec = worker.step(t, feed())
        last = [worker.step(t, feed()).loss for t in range(200, 210)]
    finally:
        worker.close()
    acc = feed.data.accuracy(worker.model)
    assert np.mean(last) < 0.5 * np.mean(first)
    assert acc > 0.85, acc
    assert rec.comm_span_s >= 0 and np.isfinite(rec.exposed_s)


def test_sma_is_kungfus_update_and_follows_parameters_given_new_storage(comm, arrays):
    """Each step ``v <- (1 - a) v + a mean(v) - lr grad(v)``, checked against the same update computed here with
    MPI's allreduce; the model lives in one flat buffer whose views are the parameters, and a parameter given
    other storage between steps (as a policy's broadcast does) is taken into it, not lost."""
    from mpi4py import MPI

    worker, feed = _worker("sma", comm, arrays, lr=0.3, seed=1)
    a = worker.sync.config.alpha
    ref = build_model("digits_mlp", 0)
    refp = list(ref.parameters())
    try:
        for t in range(4):
            if t == 2:      # new storage for one parameter, on the worker and the reference alike
                for p in (worker.params[0], refp[0]):
                    p.data = p.data.clone() + 0.01
            x, y = feed()
            v = torch.nn.utils.parameters_to_vector(refp).detach().clone()
            mean = v.clone()
            comm.Allreduce(MPI.IN_PLACE, mean.numpy(), op=MPI.SUM)
            mean /= comm.size
            loss = torch.nn.functional.cross_entropy(ref(x), y)
            grads = torch.autograd.grad(loss, refp)
            v = (1 - a) * v + a * mean - 0.3 * torch.cat([g.reshape(-1) for g in grads])
            torch.nn.utils.vector_to_parameters(v, refp)
            worker.step(t, (x, y))
            got = torch.nn.utils.parameters_to_vector(worker.params).detach()
            np.testing.assert_allclose(got.numpy(), v.numpy(), rtol=1e-5, atol=1e-6)
            flat = worker._model_flat()
            assert all(p.data_ptr() == flat[0:1].data_ptr() + 4 * off for p, off in
                       zip(worker.params, np.cumsum([0] + [p.numel() for p in worker.params])[:-1]))
    finally:
        worker.close()


@pytest.mark.parametrize("name,model", [("ring", "digits_mlp"), ("rabenseifner", "digits_cnn")])
def test_priority_schedule_trains_the_same_model_as_fifo(comm, arrays, name, model):
    """Buckets reduced in another order, each bucket's update taken in the next forward's pre-hook: the same
    parameters, bit for bit, as FIFO with one optimizer step after backward (and the forward of every step
    sees the updated parameters: the losses agree too)."""
    from hpcbench.monitors import build_monitor
    from hpcbench.train.synchronisation.buckets import BucketPlan

    runs = []
    n = len(BucketPlan([p.numel() for p in build_model(model, 0).parameters()], 200).buckets)
    assert n > 2
    for order in (None, list(range(n))[::-1]):
        worker, feed = _worker(name, comm, arrays, model=model, bucket_bytes=200, order=order)
        gns = build_monitor("gns", interval=1)
        try:
            recs = [worker.step(t, feed(), [gns] if t == 1 else []) for t in range(STEPS)]   # a monitor step too
            worker.flush()
            assert recs[1].monitor_values
            assert recs[2].comm_span_s > 0 and recs[2].exposed_s >= 0      # the last step's reductions, timed
            runs.append(([r.loss for r in recs] + sorted(recs[1].monitor_values.items()),
                         [p.detach().clone() for p in worker.model.parameters()]))
        finally:
            worker.close()
            worker.sync.close()
    (loss_fifo, fifo), (loss_prio, prio) = runs
    assert repr(loss_fifo) == repr(loss_prio)          # losses, then the monitor's outputs (NaN-safe)
    for a, b in zip(fifo, prio):
        assert torch.equal(a, b)

"""Compressed allreduce == dense sum of each rank's decompressed contribution (any world size)."""

from __future__ import annotations

import time

import numpy as np
import pytest
import torch

from hpcbench.collectives.compressed import (compressed_allreduce, dense_allreduce,
                                             icompressed_allreduce)
from hpcbench.collectives.linkmodel import BandwidthReplay, LinkTransport
from hpcbench.compress import ErrorFeedback, build, compressor_class, create, names
from hpcbench.optim import SparseAdam, SparseSGD

SIZES = [0, 1, 7, 1000]


def make(name, rank):
    kw = {"threshold": 1.0} if name == "threshold" else {}
    return build(name, seed=rank, **kw)


def local_contribution(c, x, name):
    """What this rank contributes: decompress(compress(x)) with a twin compressor."""
    payload, ctx = c.compress(x, name)
    return c.decompress(payload, ctx)


@pytest.mark.parametrize("name", [n for n in names() if n != "powersgd"])
def test_equals_dense_sum_of_contributions(comm, name):
    for n in SIZES:
        for alg in (("allgather", "ring") if compressor_class(name).kind == "sparse" else ("auto",)):
            torch.manual_seed(1000 * comm.rank + n)
            x = torch.randn(n)
            twin, real = make(name, comm.rank), make(name, comm.rank)
            mine = local_contribution(twin, x, f"t{n}")
            expect = torch.from_numpy(comm.allreduce(mine.numpy().astype(np.float64)))
            got = compressed_allreduce(x, f"t{n}", real, comm=comm, algorithm=alg)
            assert got.shape == x.shape and got.dtype == x.dtype
            assert torch.allclose(got.double(), expect, atol=1e-5, rtol=1e-5), (name, n, alg)


def test_powersgd_equals_projection_of_sum(comm):
    torch.manual_seed(comm.rank)
    for shape in [(0, 4), (1, 3), (6, 5), (40, 30)]:
        x = torch.randn(shape, dtype=torch.float64)
        c = create("powersgd", rank=2)
        got = compressed_allreduce(x, "w", c, comm=comm)
        total = torch.from_numpy(comm.allreduce(x.numpy()))
        if c.q_memory.get("w") is None:   # dense path
            assert torch.allclose(got, total)
            continue
        # all ranks share P_hat: result = P_hat P_hat^T sum(M)
        q = c.q_memory["w"]
        p_hat = torch.linalg.qr(got @ torch.linalg.pinv(q.T)).Q if False else None
        proj = got  # result lies in span(P_hat) and equals P_hat P_hat^T total
        u, s, _ = torch.linalg.svd(proj, full_matrices=False)
        basis = u[:, :2]
        assert torch.allclose(basis @ basis.T @ total, got, atol=1e-8)


def test_nonblocking_forms_overlap(comm):
    torch.manual_seed(comm.rank)
    xs = [torch.randn(500) for _ in range(3)]
    cs = [create("topk"), create("qsgd", seed=comm.rank), create("none")]
    twins = [create("topk"), create("qsgd", seed=comm.rank), create("none")]
    reqs = [icompressed_allreduce(x, f"x{i}", c, comm=comm) for i, (x, c) in enumerate(zip(xs, cs))]
    for _ in range(3):
        [r.test() for r in reqs]
    for i, (r, x, t) in enumerate(zip(reqs, xs, twins)):
        got = r.wait()
        expect = comm.allreduce(local_contribution(t, x, f"x{i}").numpy().astype(np.float64))
        assert np.allclose(got.numpy(), expect, atol=1e-5)
        assert r.test()


def test_error_feedback_through_collective(comm):
    torch.manual_seed(comm.rank)
    mem, c = ErrorFeedback(), create("thresholdv", ratio=0.1)
    total_in = torch.zeros(200)
    total_out = torch.zeros(200)
    for step in range(5):
        x = torch.randn(200)
        total_in += torch.from_numpy(comm.allreduce(x.numpy()))
        total_out += compressed_allreduce(x, "g", c, mem, comm=comm)
    residual = torch.from_numpy(comm.allreduce(mem.residuals["g"].numpy()))
    assert torch.allclose(total_out + residual, total_in, atol=1e-4)


def test_linkmodel_delays_and_counts_bytes(comm):
    if comm.size == 1:
        pytest.skip("needs two ranks")
    tr = LinkTransport(comm, alpha=0.01, beta="10Mbit")
    nbytes = 50_000  # 0.04 s at 10 Mbit/s + 0.01 s latency
    buf = np.full(nbytes, comm.rank, np.uint8)
    rbuf = np.empty(nbytes, np.uint8)
    comm.Barrier()
    t0 = time.monotonic()
    if comm.rank == 0:
        tr.isend(buf, 1, 5).wait()
        tr.isend(buf, 1, 5).wait()
    elif comm.rank == 1:
        tr.irecv(rbuf, 0, 5).wait()
        t1 = time.monotonic() - t0
        tr.irecv(rbuf, 0, 5).wait()
        t2 = time.monotonic() - t0
        # lower bounds only (load lengthens a wait, never shortens it): the first message took its modelled
        # 50 ms, and the second waited for the link the first held (serialised), not only its own 50 ms
        assert 0.045 <= t1, t1
        assert 0.085 <= t2, (t1, t2)
        assert np.all(rbuf == 0)
    assert tr.bytes_sent == (2 * nbytes if comm.rank == 0 else 0)
    assert tr.messages_sent == (2 if comm.rank == 0 else 0)
    # a collective through the link counts exactly what the ring sends
    tr2 = LinkTransport(comm, alpha=0.0, beta="10Gbit")
    x = torch.ones(4000)
    out = dense_allreduce(x, transport=tr2)
    assert torch.allclose(out, torch.full((4000,), float(comm.size)))
    bounds = np.linspace(0, 4000, comm.size + 1).astype(int)
    seg = np.diff(bounds) * 4
    r, P = comm.rank, comm.size
    expect = sum(seg[(r - s) % P] for s in range(P - 1)) + sum(seg[(r + 1 - s) % P] for s in range(P - 1))
    assert tr2.bytes_sent == expect
    tr.free()
    tr2.free()


def test_bandwidth_trace_replay():
    tr = BandwidthReplay([8e6, 16e6], interval_s=0.5)   # 1 MB/s then 2 MB/s
    assert tr.transfer_time(8e6 * 0.5, 0.0) == pytest.approx(0.5)
    assert tr.transfer_time(8e6 * 0.5 + 16e6 * 0.25, 0.0) == pytest.approx(0.75)
    assert tr.transfer_time(2 * (8e6 * 0.5 + 16e6 * 0.5), 0.0) == pytest.approx(2.0)
    assert tr.rate_at(0.7) == 16e6 and tr.rate_at(1.2) == 8e6


@pytest.mark.parametrize("name", ["topk", "thresholdv", "threshold", "dgc", "randomk"])
def test_sparse_output_is_the_dense_result(comm, name):
    """output="sparse": to_dense() bitwise equals output="dense" (same rank-ordered sums),
    coalesce() agrees with it, add_to() applies it, and every rank holds the same result."""
    from hpcbench.collectives.compressed import SparseSum

    algs = ("allgather", "ring") if name != "randomk" else ("auto",)
    for n in (0, 1, 1000, 70_000):            # 70_000: top-k's fast selection path
        for alg in algs:
            torch.manual_seed(77 * comm.rank + n)
            x = torch.randn(n)
            x[: n // 10] += 1.0                  # overlapping selections across ranks
            a, b = make(name, comm.rank), make(name, comm.rank)
            ma, mb = ErrorFeedback(), ErrorFeedback()
            for step in range(2):                # second step: with a residual
                dense = compressed_allreduce(x, "g", a, ma, comm=comm, algorithm=alg)
                sp = compressed_allreduce(x, "g", b, mb, comm=comm, algorithm=alg, output="sparse")
                assert isinstance(sp, SparseSum) and sp.shape == x.shape
                assert torch.equal(sp.to_dense(), dense), (name, n, alg, step)
                assert torch.equal(ma.residuals["g"], mb.residuals["g"])
                idx, vals = sp.coalesce()
                assert torch.equal(vals, dense.view(-1)[idx])
                assert torch.count_nonzero(dense) <= idx.numel()
                applied = sp.add_to(torch.ones(n), alpha=-0.5)     # a sparse SGD step
                assert torch.allclose(applied, torch.ones(n) - 0.5 * dense, atol=1e-5, rtol=1e-6)
                everyone = comm.allgather(dense.numpy().tobytes())
                assert all(e == everyone[0] for e in everyone)


def test_sparse_output_rejected_where_meaningless(comm):
    x = torch.randn(10)
    with pytest.raises(ValueError, match="sparse compressor"):
        icompressed_allreduce(x, "q", create("qsgd", seed=0), comm=comm, output="sparse")
    with pytest.raises(ValueError, match="out is only used"):
        icompressed_allreduce(x, "t", create("topk"), comm=comm, output="sparse", out=torch.empty(10))
    with pytest.raises(ValueError, match="output must be"):
        icompressed_allreduce(x, "t", create("topk"), comm=comm, output="coo")


def test_profile_records_encode_and_decode(comm):
    from hpcbench.collectives.compressed import PhaseProfile

    prof = PhaseProfile()
    x = torch.randn(5000)
    out = torch.full((5000,), 3.0)
    got = compressed_allreduce(x, "p", create("topk"), ErrorFeedback(), comm=comm, out=out, profile=prof)
    assert got.data_ptr() == out.data_ptr()
    assert set(prof.wall) == {"encode", "decode"} and set(prof.cpu) == {"encode", "decode"}
    assert all(v >= 0 for v in list(prof.wall.values()) + list(prof.cpu.values()))
    expect = comm.allreduce(local_contribution(create("topk"), x, "p").numpy().astype(np.float64))
    assert np.allclose(got.numpy(), expect, atol=1e-5)    # the stale 3.0 was zeroed first


@pytest.mark.parametrize("output", ["dense", "sparse"])
def test_large_topk_with_error_feedback_is_exact_and_sends_elias_fano_indices(comm, output):
    """Fast path (compiled fused scan, Elias-Fano index wire encoding): bitwise the rank-ordered sum.

    Each rank replays every rank's error-feedback steps with twin objects (separate
    compensate and compress calls), so the expected sum is built without any collective.
    """
    from hpcbench.collectives.compressed import index_codec
    n, ratio, steps = 300_000, 0.01, 3
    k = int(np.ceil(ratio * n))
    tr = LinkTransport(comm, alpha=0.0, beta="100Gbit")
    c, mem = create("topk", ratio=ratio), ErrorFeedback()
    twins = [(create("topk", ratio=ratio), ErrorFeedback()) for _ in range(comm.size)]
    out = torch.empty(n)
    for step in range(steps):
        grads = [torch.randn(n, generator=torch.Generator().manual_seed(97 * r + step))
                 for r in range(comm.size)]
        expect = torch.zeros(n)
        for r, (tc, tm) in enumerate(twins):
            acc = tm.compensate(grads[r], "w")
            payload, ctx = tc.compress(acc, "w")
            expect.index_add_(0, payload[0].long(), payload[1])
            tm.update(acc, "w", tc, payload, ctx)
        sent = tr.bytes_sent
        got = compressed_allreduce(grads[comm.rank], "w", c, mem, transport=tr, output=output,
                                   out=out if output == "dense" else None)
        dense = got if output == "dense" else got.to_dense()
        assert torch.equal(dense.view(torch.int32), expect.view(torch.int32)), step
        assert torch.equal(mem.residuals["w"], twins[comm.rank][1].residuals["w"])
        block = (index_codec.index_nbytes(k, n) + 7) // 8 * 8 + 4 * k
        assert index_codec.low_bits(k, n) == 8 and tr.bytes_sent - sent == (comm.size - 1) * block
        assert c.selector.fallbacks == 0 and c.selector.last_candidates >= k   # the fast path ran
    tr.free()


@pytest.mark.parametrize("algorithm,make", [
    ("allgather", lambda: SparseSGD(lr=0.1, momentum=0.9)),
    ("ring", lambda: SparseAdam(lr=0.01, smart_momentum=True)),
])
def test_sparse_output_feeds_the_sparse_optimizer(comm, algorithm, make):
    """Twin top-k compressors: stepping on the SparseSum equals stepping on the dense result, on every rank."""
    n = 2000
    sparse_opt, dense_opt = make(), make()
    x_sparse = torch.zeros(n)
    x_dense = torch.zeros(n)
    c1, c2 = build("topk", ratio=0.01), build("topk", ratio=0.01)
    m1, m2 = ErrorFeedback(), ErrorFeedback()
    for step in range(3):
        g = torch.from_numpy(np.random.default_rng(100 * comm.rank + step).standard_normal(n).astype(np.float32))
        result = compressed_allreduce(g, "w", c1, m1, comm=comm, algorithm=algorithm, output="sparse")
        dense = compressed_allreduce(g.clone(), "w", c2, m2, comm=comm, algorithm=algorithm)
        assert len(result.parts) == comm.size          # one part per rank (allgather) or per segment (ring)
        touched = sparse_opt.step("w", x_sparse, result, average_over=comm.size)
        # the dense result's nonzeros are among the touched indices, and their values are the same bits
        assert set(np.flatnonzero(dense.numpy())) <= set(np.asarray(touched.indices).tolist())
        idx = torch.from_numpy(np.asarray(touched.indices, dtype=np.int64))
        assert torch.equal(dense[idx], torch.from_numpy(touched.values))
        dense_opt.step("w", x_dense, (idx, dense[idx]), average_over=comm.size)
    assert torch.equal(x_sparse, x_dense)
    # every rank holds the same parameters
    got = comm.allgather(x_sparse.numpy().tobytes())
    assert all(b == got[0] for b in got)

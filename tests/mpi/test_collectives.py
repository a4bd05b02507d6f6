"""Custom collectives against MPI's own, at any world size (run under mpiexec -n 1..4)."""

from __future__ import annotations

import time
import zlib

import numpy as np
import pytest
import torch
from mpi4py import MPI

import hpcbench.collectives as hc
from hpcbench.collectives.algorithms import names

ALGS = names()
COUNTS = [0, 1, 3, 7, 2501]
DTYPES = ["float32", "float64", "bfloat16", "int64"]
OPS = ["sum", "avg", "max", "min"]
MPI_OP = {"sum": MPI.SUM, "avg": MPI.SUM, "max": MPI.MAX, "min": MPI.MIN}


def _data(comm, count, dtype, seed=0):
    rng = np.random.default_rng([seed, comm.rank, count])
    if dtype == "int64":
        return rng.integers(-1000, 1000, count).astype(np.int64)
    v = rng.standard_normal(count) * 10
    if dtype == "bfloat16":
        return torch.from_numpy(v).to(torch.bfloat16)
    return v.astype(dtype)


def _reference(comm, x, op):
    x64 = x.to(torch.float64).numpy() if isinstance(x, torch.Tensor) else x
    ref = np.empty_like(x64)
    comm.Allreduce(x64, ref, op=MPI_OP[op])
    if op == "avg":
        ref = ref // comm.size if ref.dtype == np.int64 else ref / comm.size
    return ref


def _check(y, ref, dtype, op, n):
    got = y.to(torch.float64).numpy() if isinstance(y, torch.Tensor) else y
    if dtype == "int64" or op in ("max", "min"):
        if dtype == "bfloat16":  # max/min of bf16 values is exact in float64
            np.testing.assert_array_equal(got, ref)
        else:
            np.testing.assert_array_equal(got, ref.astype(got.dtype))
        return
    # reassociation error: n roundings of partial sums of magnitude <= sum |x|
    eps = {"float32": 2 ** -23, "float64": 2 ** -52, "bfloat16": 2 ** -7}[dtype]
    scale = np.abs(ref) + 10 * 4 * n
    np.testing.assert_array_less(np.abs(got - ref), 4 * n * eps * scale + 1e-300)


def _bytes_equal_everywhere(comm, y):
    raw = (y.view(torch.int16).numpy() if y.dtype == torch.bfloat16 else y.numpy()) \
        if isinstance(y, torch.Tensor) else y
    b = raw.tobytes()
    allb = comm.allgather(b)
    return all(o == allb[0] for o in allb)


@pytest.mark.parametrize("alg", ALGS)
def test_allreduce_all_cases(comm, alg):
    n = comm.size
    for count in COUNTS + [n - 1 if n > 1 else 0, 2 * n + 1]:
        for dtype in DTYPES:
            for op in OPS:
                x = _data(comm, count, dtype)
                ref = _reference(comm, x, op)
                y = hc.allreduce(x, op=op, algorithm=alg, comm=comm, local_size=2)
                _check(y, ref, dtype, op, n)
                # in place gives the same bytes
                z = x.clone() if isinstance(x, torch.Tensor) else x.copy()
                out = hc.allreduce(z, z, op=op, algorithm=alg, comm=comm, local_size=2)
                assert out is z
                # every algorithm, recursive doubling included: both partners of an exchange add
                # the same two partials (IEEE addition commutes), so all ranks hold the same bits
                assert _bytes_equal_everywhere(comm, z)
                if isinstance(z, torch.Tensor):
                    assert torch.equal(z, y)
                else:
                    np.testing.assert_array_equal(z, y)


@pytest.mark.parametrize("alg", [a for a in ALGS if a != "recursive_doubling"] + ["auto"])
def test_deterministic_bitwise(comm, alg):
    for count in (5, 3001):
        for dtype in ("float32", "bfloat16", "float64"):
            x = _data(comm, count, dtype, seed=7)
            y = hc.allreduce(x, op="avg", algorithm=alg, deterministic=True, comm=comm)
            assert _bytes_equal_everywhere(comm, y)
            y2 = hc.allreduce(x, op="avg", algorithm=alg, deterministic=True, comm=comm)
            assert _bytes_equal_everywhere(comm, y2) and bytes(np.asarray(
                y.view(torch.int16) if isinstance(y, torch.Tensor) else y)) == bytes(
                np.asarray(y2.view(torch.int16) if isinstance(y2, torch.Tensor) else y2))


def test_ring_many_segments(comm, monkeypatch):
    from hpcbench.collectives.algorithms import ring
    monkeypatch.setattr(ring, "SEGMENT_BYTES", 64)
    x = _data(comm, 1000, "float64")
    ref = _reference(comm, x, "sum")
    for out in (None, x.copy()):
        y = hc.allreduce(x if out is None else out, out, algorithm="ring", comm=comm)
        _check(y, ref, "float64", "sum", comm.size)


def test_reduce_scatter_allgather_bcast(comm):
    n, r = comm.size, comm.rank
    for count in (0, 1, n + 1, 1001):
        for dtype in ("float64", "int64", "bfloat16"):
            x = _data(comm, count, dtype)
            ref = _reference(comm, x, "sum")
            q, rem = divmod(count, n)
            lo = r * q + min(r, rem)
            hi = lo + q + (1 if r < rem else 0)
            y = hc.reduce_scatter(x, op="sum", comm=comm)
            assert y.shape[0] == hi - lo
            _check(y, ref[lo:hi], dtype, "sum", n)
            g = hc.allgather(x, comm=comm)
            assert tuple(g.shape) == (n, count)
            want = comm.allgather(x.to(torch.float64).numpy() if isinstance(x, torch.Tensor)
                                  else x)
            for i in range(n):
                gi = g[i].to(torch.float64).numpy() if isinstance(g, torch.Tensor) else g[i]
                np.testing.assert_array_equal(gi, np.asarray(want[i], dtype=gi.dtype))
            for root in {0, n - 1}:
                b = x.clone() if isinstance(x, torch.Tensor) else x.copy()
                hc.bcast(b, root, comm=comm)
                rootdata = comm.bcast(x if r == root else None, root=root)
                if isinstance(b, torch.Tensor):
                    assert torch.equal(b, rootdata)
                else:
                    np.testing.assert_array_equal(b, rootdata)


def test_requests_out_of_order_and_named(comm):
    n = comm.size
    xs = [np.full(500 + 37 * i, float(comm.rank + i)) for i in range(12)]
    reqs = [hc.iallreduce(x, algorithm=["ring", "tree", "star", "rabenseifner"][i % 4],
                          comm=comm, name=f"grad{i}") for i, x in enumerate(xs)]
    rs = hc.ireduce_scatter(np.ones(10 * n), comm=comm, name="rs")
    ag = hc.iallgather(np.full(3, float(comm.rank)), comm=comm, name="ag")
    bc = hc.ibcast(np.full(4, float(comm.rank)), 0, comm=comm, name="bc")
    # wait in reverse order
    for i in reversed(range(len(reqs))):
        y = reqs[i].wait()
        np.testing.assert_allclose(y, n * i + n * (n - 1) / 2)
        assert reqs[i].test()
    assert bc.wait()[0] == 0.0
    np.testing.assert_array_equal(ag.wait().reshape(n, 3)[:, 0], np.arange(n))
    np.testing.assert_array_equal(rs.wait(), np.full(10, float(n)))
    # waitall, and a second round reusing the names
    reqs = [hc.iallreduce(x, comm=comm, name=f"grad{i}") for i, x in enumerate(xs)]
    outs = hc.Request.waitall(reqs)
    for i, y in enumerate(outs):
        np.testing.assert_allclose(y, n * i + n * (n - 1) / 2)


def test_overlap_makes_progress_while_computing(comm):
    """Loose check: after enough compute, wait() returns fast relative to comm alone."""
    n = comm.size
    x = np.ones(1 << 20, dtype=np.float32)
    out = np.empty_like(x)
    t0 = time.perf_counter()
    hc.allreduce(x, out, algorithm="ring", comm=comm)
    t_comm = comm.allreduce(time.perf_counter() - t0, op=MPI.MAX)
    req = hc.iallreduce(x, out, algorithm="ring", comm=comm, name="overlap")
    deadline = time.perf_counter() + max(0.5, 20 * t_comm)
    while not req.test() and time.perf_counter() < deadline:
        a = torch.ones(128, 128)
        for _ in range(20):
            a = torch.mm(a, a) * 1e-3     # compute without calling into MPI
    done = req.test()
    req.wait()
    np.testing.assert_allclose(out, n)
    if hc.progress_mode() == "thread" and n > 1:
        assert comm.allreduce(done, op=MPI.LAND)


def test_pair_average_and_sma(comm):
    n, r = comm.size, comm.rank
    for step in range(3):
        partner = hc.pair_schedule(step, n, seed=5)
        assert all(partner[partner[i]] == i for i in range(n))
        p = np.full(100, float(r), dtype=np.float64)
        peer = hc.pair_average(p, step, seed=5, comm=comm)
        assert peer == partner[r]
        np.testing.assert_allclose(p, (r + peer) / 2)
        t = torch.full((64,), float(r), dtype=torch.bfloat16)
        req = hc.ipair_average(t, step, seed=5, comm=comm, name="pa")
        req.wait()
        assert torch.allclose(t.float(), torch.full((64,), (r + peer) / 2), atol=0.05)
    m = torch.arange(50, dtype=torch.float32) * (r + 1)
    hc.sma_average(m, comm=comm)
    assert torch.allclose(m, torch.arange(50, dtype=torch.float32) * (n + 1) / 2)
    assert _bytes_equal_everywhere(comm, m)


def test_bad_arguments(comm):
    x = np.ones(4)
    with pytest.raises(ValueError, match="op"):
        hc.allreduce(x, op="prod", comm=comm)
    with pytest.raises(ValueError, match="algorithm"):
        hc.allreduce(x, algorithm="nope", comm=comm)
    with pytest.raises(TypeError, match="x"):
        hc.allreduce([1.0, 2.0], comm=comm)
    with pytest.raises(TypeError, match="dtype"):
        hc.allreduce(np.ones(3, dtype=np.int8), comm=comm)
    with pytest.raises(ValueError, match="out"):
        hc.allreduce(x, np.ones(5), comm=comm)
    with pytest.raises(TypeError, match="out"):
        hc.allreduce(x, np.ones(4, dtype=np.float32), comm=comm)
    with pytest.raises(ValueError, match="root"):
        hc.bcast(x, comm.size, comm=comm)
    with pytest.raises(ValueError, match="deterministic"):
        hc.allreduce(x, algorithm="recursive_doubling", deterministic=True, comm=comm)


def test_small_fast_path_matches_generator(comm):
    """The blocking small-message fast path gives the bytes of the generator of the
    algorithm it runs (recursive_doubling, and what ``auto`` resolves to: recursive
    doubling up to the eager limit), driven through iallreduce, for every dtype/op,
    shape, in place or not."""
    n = comm.size
    for count in (1, 5, 256, 1000):
        for dtype in ("float32", "float64", "int64"):
            for op in OPS:
                x = _data(comm, count, dtype, seed=3)
                ref = _reference(comm, x, op)
                for alg in ("auto", "recursive_doubling"):
                    resolved = hc.choose_algorithm(x.nbytes, n) if alg == "auto" else alg
                    want = hc.iallreduce(x, op=op, algorithm=resolved, comm=comm).wait()
                    y = hc.allreduce(x, op=op, algorithm=alg, comm=comm)
                    _check(y, ref, dtype, op, n)
                    assert y.tobytes() == want.tobytes()
                    o = np.empty_like(x)
                    assert hc.allreduce(x, o, op=op, algorithm=alg, comm=comm) is o
                    assert o.tobytes() == want.tobytes()
                    z = x.copy()
                    assert hc.allreduce(z, z, op=op, algorithm=alg, comm=comm) is z
                    assert z.tobytes() == want.tobytes()
    x2 = np.arange(12, dtype=np.float64).reshape(3, 4) + comm.rank
    y2 = hc.allreduce(x2, comm=comm)
    assert y2.shape == (3, 4)
    np.testing.assert_array_equal(y2, n * np.arange(12).reshape(3, 4) + n * (n - 1) / 2)
    tr = hc.api._resolve(comm, None)[1]
    before = tr.messages_sent
    hc.allreduce(np.ones(8), comm=comm)
    assert tr.messages_sent > before or n == 1


def test_link_transport_small_and_progress_sleeps(comm):
    """Fast path and nonblocking ops over the link model; the progress thread sleeps
    while the modelled wire time runs (little CPU over a long modelled transfer)."""
    from hpcbench.collectives.linkmodel import LinkTransport
    n = comm.size
    lt = LinkTransport(comm, alpha=1e-4, beta="100Mbit")     # a long modelled wire: sleeping must dominate
    try:
        y = hc.allreduce(np.full(16, float(comm.rank)), transport=lt)
        np.testing.assert_allclose(y, n * (n - 1) / 2)
        if n == 1:
            return
        assert lt.messages_sent > 0
        x = np.ones(1 << 18, dtype=np.float32)          # 1 MiB: ~84 ms per step at 100 Mbit/s
        cpu0, t0 = time.process_time(), time.perf_counter()
        reqs = [hc.iallreduce(x, algorithm="ring", transport=lt, name=f"lk{i}")
                for i in range(4)]
        for r in hc.Request.waitall(reqs):
            np.testing.assert_allclose(r, n)
        cpu, wall = time.process_time() - cpu0, time.perf_counter() - t0
        assert wall >= 4 * 8 * (1 << 20) / 1e8 * (n - 1) / n   # modelled time was waited
        assert cpu < 0.6 * wall, (cpu, wall)
    finally:
        lt.free()


def _forge_name(prefix: str, crc: int, nchars: int = 48) -> str:
    """A name ``prefix + [ab]*nchars`` with ``crc32(f"{name}#0") == crc``.

    CRC-32 is affine in the message bits for a fixed length, so which of the
    ``a``/``b`` flips to make is a linear system over GF(2), solved by elimination.
    """
    def crc_of(chars):
        return zlib.crc32((prefix + "".join(chars) + "#0").encode())

    base = ["a"] * nchars
    c0 = crc_of(base)
    pivots: dict[int, tuple[int, int]] = {}        # top bit -> (crc delta, flip mask)
    for i in range(nchars):
        v, mask = crc_of(base[:i] + ["b"] + base[i + 1:]) ^ c0, 1 << i
        for bit in sorted(pivots, reverse=True):
            if v >> bit & 1:
                v, mask = v ^ pivots[bit][0], mask ^ pivots[bit][1]
        if v:
            pivots[v.bit_length() - 1] = (v, mask)
    want, mask = c0 ^ crc, 0
    for bit in sorted(pivots, reverse=True):
        if want >> bit & 1:
            want, mask = want ^ pivots[bit][0], mask ^ pivots[bit][1]
    assert want == 0, "CRC not reachable with these flips"
    name = prefix + "".join("b" if mask >> i & 1 else "a" for i in range(nchars))
    assert zlib.crc32(f"{name}#0".encode()) == crc
    return name


def test_dense_and_compressed_tags_never_collide(comm):
    """A dense iallreduce and a compressed sparse allreduce outstanding at once, started
    in opposite orders on neighbouring ranks, where the dense name is chosen so that
    under the old scheme (dense: ``1 + crc32 % (TAG_UB - 1)``; compressed: ``2**24 + 8 s``
    for the ``s``-th compressed call) both would have used the same tag and their
    messages would have matched each other's receives."""
    from hpcbench.collectives._core import context_for
    from hpcbench.collectives.compressed import icompressed_allreduce
    from hpcbench.collectives.tags import TagSpace
    from hpcbench.compress import create

    n, r = comm.size, comm.rank
    tag_ub = context_for(comm).tags.tag_ub
    fresh = TagSpace(tag_ub)                       # replays the allocations of this fresh comm
    for s, alg in enumerate(("allgather", "ring")):
        old_compressed = (1 << 24) + 8 * s
        name = _forge_name(f"dense{s}-", old_compressed - 1)
        if tag_ub > old_compressed:                # the old scheme's collision is real here
            assert 1 + zlib.crc32(f"{name}#0".encode()) % (tag_ub - 1) == old_compressed
        dense_tag, comp_tag = fresh.named(name), fresh.block()
        assert fresh.family(dense_tag) == "dense" and fresh.family(comp_tag) == "compressed"

        x = np.full(1 << 16, float(r + 1), dtype=np.float32)     # ring: several messages
        g = torch.arange(4000, dtype=torch.float32) * (r + 1)    # same top-k indices everywhere
        comp = create("topk", ratio=0.1)

        def dense():
            return hc.iallreduce(x, algorithm="ring", comm=comm, name=name)

        def sparse():
            return icompressed_allreduce(g, "grad", comp, comm=comm, algorithm=alg)

        if r % 2 == 0:
            d, c = dense(), sparse()
        else:
            c, d = sparse(), dense()
        got_c, got_d = c.wait(), d.wait()
        total = n * (n + 1) / 2
        np.testing.assert_array_equal(got_d, np.full_like(x, total))
        want = torch.arange(4000, dtype=torch.float32) * total
        want[:3600] = 0                            # k = 400 largest magnitudes kept
        assert torch.equal(got_c, want), (alg, r)


def test_link_not_before_is_a_lower_bound(comm):
    """A receive whose message was not sent yet cannot complete before ``now + alpha +
    bytes / rate`` (what lets the progress thread sleep instead of polling), and does
    complete after that bound; a send knows its modelled end."""
    from hpcbench.collectives.linkmodel import LinkTransport
    n, r = comm.size, comm.rank
    lt = LinkTransport(comm, alpha=1e-3, beta="1Gbit")
    try:
        if n == 1:
            return
        nbytes = 1 << 17                             # 1.05 ms at 1 Gbit/s
        if r == 1:
            buf = np.zeros(nbytes, np.uint8)
            q = lt.irecv(buf, 0, tag=7)
            assert not q.test()
            now = time.monotonic()
            bound = q.not_before(now)
            assert bound == pytest.approx(now + 1e-3 + 8 * nbytes / 1e9)
            comm.Barrier()                           # rank 0 sends only after this
            q.wait()
            assert time.monotonic() >= bound and (buf == 1).all()
        elif r == 0:
            comm.Barrier()
            s = lt.isend(np.ones(nbytes, np.uint8), 1, tag=7)
            if not s.test():
                t = s.not_before(time.monotonic())
                assert t is None or t == s.ready_at
            s.wait()
            assert time.monotonic() >= s.ready_at
        else:
            comm.Barrier()
    finally:
        lt.free()


# -- small-message paths: persistent plans, iallreduce waits driven by the caller --

@pytest.mark.parametrize("alg", ["ring", "rabenseifner"])
@pytest.mark.parametrize("dtype", ["float32", "float64", "int64"])
def test_plan_gives_the_generators_bytes(comm, dtype, alg):
    """Blocking calls run persistent plans (ring at any size; Rabenseifner at 2 and 4
    ranks): the bytes of the generator (iallreduce without out), out of place and in place."""
    n = comm.size
    for count in (1, n + 1, 1000, 70_000):
        for op in OPS:
            rng = np.random.default_rng([comm.rank, count])
            x = (rng.standard_normal(count) * 100).astype(dtype)
            want = hc.iallreduce(x, op=op, algorithm=alg, comm=comm).wait()
            y = hc.allreduce(x, op=op, algorithm=alg, comm=comm)
            assert y.tobytes() == want.tobytes()
            z = x.copy()
            assert hc.allreduce(z, z, op=op, algorithm=alg, comm=comm) is z
            assert z.tobytes() == want.tobytes()
            ref = np.empty_like(x)
            comm.Allreduce(x.astype(np.float64) if dtype != "int64" else x,
                           ref if dtype == "int64" else (ref := ref.astype(np.float64)))
            if op == "sum":
                tol = 1e-3 * n if dtype == "float32" else 1e-10 * n   # inputs of size ~100
                np.testing.assert_allclose(y, ref, rtol=0, atol=tol)


def test_ring_plan_declines_multi_segment_blocks(comm, monkeypatch):
    """Blocks above one segment take the pipelined generator (same result)."""
    from hpcbench.collectives.algorithms import ring
    monkeypatch.setattr(ring, "SEGMENT_BYTES", 256)
    x = np.arange(2000, dtype=np.float64) + comm.rank
    y = hc.allreduce(x, algorithm="ring", comm=comm)
    n = comm.size
    np.testing.assert_array_equal(y, n * np.arange(2000) + n * (n - 1) / 2)


def _plans(comm):
    return hc.api._resolve(comm, None)[0].plans


def test_plans_are_reused_and_evicted(comm):
    """A call repeated on the same arrays reuses its plan (fresh data each time);
    more distinct buffers than the cache keeps evict and free the oldest plans."""
    from hpcbench.collectives.persistent import PLANS_KEPT
    n = comm.size
    plans = _plans(comm)
    plans.clear()
    x, out = np.zeros(64, dtype=np.float64), np.empty(64)
    for k in range(3):
        x[:] = k + comm.rank
        assert hc.allreduce(x, out, algorithm="ring", comm=comm) is out
        np.testing.assert_array_equal(out, n * k + n * (n - 1) / 2)
        if n > 1:
            assert len(plans) == 1 and plans.last[0] is x
    y1 = hc.allreduce(x, comm=comm)              # no `out`: a copy of the plan's output
    x[:] = -1.0
    y2 = hc.allreduce(x, comm=comm)
    assert y1 is not y2 and np.all(y1 == n * 2 + n * (n - 1) / 2) and np.all(y2 == -n)
    arrays = [np.full(16, float(i)) for i in range(PLANS_KEPT + 5)]
    first = None
    for i, a in enumerate(arrays):
        o = np.empty_like(a)
        hc.allreduce(a, o, algorithm="ring", comm=comm)
        assert np.all(o == n * i)
        if i == 0 and n > 1:
            first = plans.last[7]
    assert len(plans) <= PLANS_KEPT + 1
    if n > 1:
        assert first.steps == ()                  # evicted and freed
    plans.clear()
    assert len(plans) == 0


def test_ranks_on_plan_and_generator_paths_match(comm):
    """The blocking tag does not depend on the path: a rank whose buffer is
    not contiguous (generator) meets ranks that run a plan, with the same bits."""
    for alg in ("ring", "recursive_doubling", "auto"):
        for count in (5, 300):
            rng = np.random.default_rng([comm.rank, count])
            base = rng.standard_normal(2 * count)
            x = base[::2] if comm.rank == 0 else base[::2].copy()
            want = hc.iallreduce(np.ascontiguousarray(x), algorithm=alg, comm=comm).wait()
            for _ in range(2):
                y = hc.allreduce(x, algorithm=alg, comm=comm)
                assert y.tobytes() == want.tobytes()


def test_blocking_plans_beside_outstanding_nonblocking(comm):
    """Unnamed blocking calls (plans, blocking tag) between the start and the wait of
    unnamed and named nonblocking ones: nothing crosses."""
    n = comm.size
    a = np.full(200, float(comm.rank), dtype=np.float32)
    b = np.full(7, 1.0)
    r1 = hc.iallreduce(a, comm=comm)
    r2 = hc.iallreduce(a, algorithm="ring", comm=comm, name="bucket")
    outs = [hc.allreduce(np.full(7, float(k)), algorithm=alg, comm=comm)
            for k, alg in enumerate(["ring", "recursive_doubling", "auto", "ring"])]
    for k, o in enumerate(outs):
        assert np.all(o == n * k)
    assert np.all(hc.allreduce(b, b, op="avg", comm=comm) == 1.0)
    assert np.all(r1.wait() == n * (n - 1) / 2) and np.all(r2.wait() == n * (n - 1) / 2)


def test_plans_follow_crossover_changes(comm, monkeypatch):
    """``auto`` is resolved before a plan is looked up: after CROSSOVER moves, a rank
    with a cached plan and a rank without one still run the same algorithm."""
    n = comm.size
    x = np.arange(128, dtype=np.float64) + comm.rank
    want = n * np.arange(128) + n * (n - 1) / 2
    np.testing.assert_array_equal(hc.allreduce(x, comm=comm), want)      # plan cached
    monkeypatch.setitem(hc.CROSSOVER, "small", 0)
    y = hc.allreduce(x if comm.rank == 0 else x.copy(), comm=comm)
    np.testing.assert_array_equal(y, want)


def test_plans_check_byte_order(comm):
    """A byte-swapped view of planned arrays is refused like any other (TypeError),
    never reduced as native numbers."""
    a = np.arange(4, dtype=np.float64) + comm.rank
    o = np.empty_like(a)
    hc.allreduce(a, o, algorithm="ring", comm=comm)
    with pytest.raises(TypeError, match="dtype"):
        hc.allreduce(a.view(">f8"), o.view(">f8"), algorithm="ring", comm=comm)


def test_a_failing_run_frees_its_plan(comm):
    """A reduction that raises on every rank (overflow under np.errstate) frees the
    plan it ran instead of losing it with live requests; the next call works."""
    n = comm.size
    x, out = np.full(64, 1e308), np.empty(64)
    plans = _plans(comm)
    if n > 1:
        with np.errstate(over="ignore"):
            hc.allreduce(x, out, algorithm="ring", comm=comm)
        plan = plans.last[7]
        with np.errstate(over="raise"), pytest.raises(FloatingPointError):
            hc.allreduce(x, out, algorithm="ring", comm=comm)
        assert plan.steps == () and plans.last is None
    x[:] = 1.0
    assert np.all(hc.allreduce(x, out, algorithm="ring", comm=comm) == n)


def test_freeing_a_communicator_frees_its_plans(comm):
    """MPICH defers freeing a communicator while persistent requests exist: the plans
    of a freed one are freed by the next plan built, and then its attributes go."""
    deleted = []
    kv = MPI.Comm.Create_keyval(delete_fn=lambda c, k, v: deleted.append(v))
    c = MPI.COMM_WORLD.Dup()
    c.Set_attr(kv, "c")
    x = np.ones(32)
    hc.allreduce(x, x, algorithm="ring", comm=c)
    plans = _plans(c)
    assert len(plans) == (1 if c.size > 1 else 0)
    last = plans.last
    c.Free()
    hc.allreduce(np.ones(3), algorithm="ring", comm=comm)  # a new plan sweeps freed comms
    assert len(plans) == 0 and deleted == ["c"]
    if last is not None:
        assert last[7].steps == ()
    MPI.Comm.Free_keyval(kv)


def test_iallreduce_waits_drive_many_outstanding(comm):
    """Several named requests outstanding, waited in reverse order, while the progress
    thread also advances them: every result right."""
    n = comm.size
    xs = [np.full(k * 300 + 1, float(comm.rank + k), dtype=np.float32) for k in range(6)]
    reqs = [hc.iallreduce(x, algorithm=a, comm=comm, name=f"b{k}")
            for k, (x, a) in enumerate(zip(xs, ["ring", "auto"] * 3))]
    for k in reversed(range(6)):
        got = reqs[k].wait()
        assert np.all(got == n * k + n * (n - 1) / 2)
        assert reqs[k].test()


@pytest.mark.parametrize("alg", ["ring", "rabenseifner", "auto"])
def test_ordered_allreduce_follows_its_order_and_matches_iallreduce(comm, alg):
    """Buffers marked ready in index order go out in the given order, one at a time; results as iallreduce."""
    from hpcbench.collectives.ordered import OrderedAllreduce

    rng = np.random.default_rng(comm.rank)
    sizes = [3000, 17, 40000, 5]
    data = [rng.standard_normal(n).astype(np.float32) for n in sizes]
    want = [hc.iallreduce(d.copy(), op="avg", algorithm=alg, comm=comm, name=f"ref{i}").wait()
            for i, d in enumerate(data)]
    bufs = [d.copy() for d in data]
    order = [2, 0, 3, 1]
    op = OrderedAllreduce(bufs, order, op="avg", algorithm=alg, comm=comm, name="ord")
    with pytest.raises(RuntimeError, match="before mark_ready"):
        op.wait_one(1)
    for i in range(len(bufs)):
        op.mark_ready(i)
        time.sleep(0.002)
    op.wait_one(3)                       # the ones before it in the order are done too
    assert op.done(2) and op.done(0) and op.done(3)
    op.wait()
    for got, w in zip(bufs, want):
        np.testing.assert_array_equal(got, w)
    started = op.started_at[order]
    assert np.all(np.diff(started) >= 0)                           # started in the given order
    assert np.all(op.started_at[order[1:]] >= op.completed_at[order[:-1]])   # one on the wire at a time
    with pytest.raises(ValueError, match="permutation"):
        OrderedAllreduce(bufs, [0, 0, 1, 2], comm=comm)


# -- small nonblocking calls: tagged plans and the lazy hand-off to the progress thread --

def _nb_plans(comm):
    return hc.api._resolve(comm, None)[0].nb_plans


@pytest.mark.parametrize("alg", ["ring", "recursive_doubling", "rabenseifner", "auto"])
def test_tagged_plans_give_the_generators_bytes(comm, alg):
    """iallreduce(x, out) of numpy arrays runs a tagged plan when named, a slot plan when
    not (both reused on the same arrays): the bytes of the generator (a named iallreduce
    without out), out of place and in place."""
    for dtype in ("float32", "float64", "int64"):
        for count in (1, 5, 1000):
            for op in OPS:
                x = _data(comm, count, dtype, seed=5)
                want = hc.iallreduce(x, op=op, algorithm=alg, comm=comm, name="gen").wait()
                assert hc.iallreduce(x, op=op, algorithm=alg, comm=comm).wait().tobytes() == want.tobytes()
                o = np.empty_like(x)
                for name in (None, None, "t", "t"):
                    assert hc.iallreduce(x, o, op=op, algorithm=alg, comm=comm, name=name).wait() is o
                    assert o.tobytes() == want.tobytes()
                z = x.copy()
                assert hc.iallreduce(z, z, op=op, algorithm=alg, comm=comm).wait() is z
                assert z.tobytes() == want.tobytes()
    ctx = hc.api._resolve(comm, None)[0]
    if (alg == "ring" and comm.size > 1) or comm.size in (2, 4):   # a schedule exists
        assert len(ctx.nb_plans) >= 1 and len(ctx.slot_plans) >= 1  # kept back after each completion


def test_slots_reused_with_more_calls_outstanding_than_slots(comm):
    """Three times as many unnamed calls outstanding as there are tag slots, so each slot's
    later calls wait for its earlier ones; buffers of several sizes (plans of their own
    per slot), a non-contiguous input on rank 0, no ``out`` on rank 1; waited in a
    shuffled order (the same on every rank), twice (the second round replays the
    slots' requests): every result is MPI's sum."""
    from hpcbench.collectives.tags import SLOTS

    n, r = comm.size, comm.rank
    k = 3 * SLOTS
    order = np.random.default_rng(7).permutation(k)
    for _ in range(2):
        xs, outs, want = [], [], []
        for i in range(k):
            count = 16 + 40 * (i % 3)
            base = np.arange(2 * count, dtype=np.float64) * (r + 1) + i
            xs.append(base[::2] if r == 0 else base[::2].copy())
            outs.append(None if r == 1 and i % 2 else np.empty(count))
            want.append(np.empty(count))
            comm.Allreduce(np.ascontiguousarray(xs[-1]), want[-1])
        reqs = [hc.iallreduce(x, o, algorithm=["ring", "auto"][i % 2], comm=comm)
                for i, (x, o) in enumerate(zip(xs, outs))]
        for i in order:
            got = reqs[i].wait()
            assert got is outs[i] or outs[i] is None
            np.testing.assert_array_equal(got, want[i])
    ctx = hc.api._resolve(comm, None)[0]
    slotted = k if n in (2, 4) else k // 2 if n > 1 else 0   # auto: recursive doubling, 2**j ranks
    assert ctx.slots.started == 2 * slotted


def test_tagged_and_generator_ranks_match_with_many_outstanding(comm):
    """Rank 0 takes the generator (non-contiguous input), the others tagged plans;
    several named and unnamed requests outstanding at once, waited in reverse order."""
    n = comm.size
    xs, outs = [], []
    for k in range(6):
        base = np.full(2 * (40 + k), float(comm.rank + k))
        xs.append(base[::2] if comm.rank == 0 else base[::2].copy())
        outs.append(np.empty(40 + k))
    reqs = [hc.iallreduce(x, o, algorithm=["ring", "auto"][k % 2], comm=comm,
                          name=None if k % 3 else f"t{k}")
            for k, (x, o) in enumerate(zip(xs, outs))]
    for k in reversed(range(6)):
        assert reqs[k].wait() is outs[k]
        assert np.all(outs[k] == n * k + n * (n - 1) / 2)


def test_lazy_hand_off_completes_without_wait(comm):
    """A small request given to a watching progress thread without a wake-up is still
    completed by it while the caller never calls into MPI."""
    from hpcbench.collectives import progress
    n = comm.size
    x, o = np.full(64, float(comm.rank)), np.empty(64)
    hc.iallreduce(x, o, comm=comm).wait()             # the thread is now started and watching
    comm.Barrier()
    req = hc.iallreduce(x, o, comm=comm)
    t_end = time.perf_counter() + 5.0
    while time.perf_counter() < t_end and not req.test():
        time.sleep(progress.HANDOFF_S)               # no MPI call from this thread
    done = req.test()
    req.wait()
    assert np.all(o == n * (n - 1) / 2)
    if hc.progress_mode() == "thread":
        assert done


def test_weighted_shards_with_weights(comm):
    """Uneven and empty shards (the slow rank owning none) still give the sum, the same bits on every rank,
    through the blocking, the nonblocking and the ordered paths; over a modelled link a rank with no shard
    sends its buffer exactly once."""
    from hpcbench.collectives.linkmodel import LinkTransport
    from hpcbench.collectives.ordered import OrderedAllreduce

    n = comm.size
    for weights in ([0.0] + [1.0] * (n - 1) if n > 1 else [1.0], list(range(1, n + 1))):
        for count in (0, 1, n + 2, 1_100_000):       # the last: one chunk above the plans' size, two chunks
            x = _data(comm, count, "float64", seed=3)
            ref = _reference(comm, x, "sum")
            y = hc.allreduce(x, algorithm="weighted_shards", comm=comm, weights=weights)
            _check(y, ref, "float64", "sum", n)
            assert _bytes_equal_everywhere(comm, y)
            z = hc.iallreduce(x, x.copy(), algorithm="weighted_shards", comm=comm, weights=weights).wait()
            np.testing.assert_array_equal(z, y)
            o = x.copy()
            ordered = OrderedAllreduce([o], [0], op="sum", algorithm="weighted_shards", comm=comm,
                                       weights=weights)
            ordered.mark_ready(0)
            ordered.wait()
            np.testing.assert_array_equal(o, y)
    lt = LinkTransport(comm, beta="100Gbit")
    try:
        x = _data(comm, 5000, "float32", seed=4)
        weights = [0.0] + [1.0] * (n - 1) if n > 1 else [1.0]
        y = hc.allreduce(x, algorithm="weighted_shards", transport=lt, weights=weights)
        _check(y, _reference(comm, x, "sum"), "float32", "sum", n)
        if n > 1 and comm.rank == 0:
            assert lt.bytes_sent == x.nbytes            # its contribution, once: the least any allreduce can
    finally:
        lt.free()
    with pytest.raises(ValueError, match="weights"):
        hc.allreduce(np.ones(4), algorithm="weighted_shards", comm=comm, weights=[1.0] * (n + 1))
    with pytest.raises(ValueError, match="weights"):
        hc.allreduce(np.ones(4), algorithm="ring", comm=comm, weights=[1.0] * n)

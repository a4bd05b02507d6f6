"""Property tests of every compressor (hypothesis) and of error feedback."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import given, settings, strategies as st
from mpi4py import MPI

from hpcbench.collectives.compressed import compressed_allreduce
from hpcbench.compress import ErrorFeedback, build, compressor_class, create, names, payload_nbytes
from hpcbench.compress.base import check_ratio

#: sparsifiers keep a subset of the elements, bit for bit (read from the classes' capabilities)
SPARSIFIERS = [n for n in names() if compressor_class(n).takes_ratio or compressor_class(n).approximates_topk]
FAST = settings(max_examples=25, deadline=None)

shapes = st.lists(st.integers(0, 9), min_size=1, max_size=3).map(tuple)
dtypes = st.sampled_from([torch.float32, torch.float64, torch.float16, torch.bfloat16])


def make(name, **kw):
    return build(name, seed=kw.pop("seed", 0), **kw)


def rand(shape, dtype, seed):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(shape, generator=g, dtype=torch.float64).to(dtype)


def roundtrip(c, x, name="t"):
    if c.kind == "lowrank":
        return compressed_allreduce(x, name, c, comm=MPI.COMM_SELF)
    payload, ctx = c.compress(x, name)
    assert all(isinstance(t, torch.Tensor) and t.dim() == 1 for t in payload)
    return c.decompress(payload, ctx)


@pytest.mark.parametrize("name", names())
@FAST
@given(shape=shapes, dtype=dtypes, seed=st.integers(0, 2 ** 16))
def test_shape_and_dtype_preserved(name, shape, dtype, seed):
    c = make(name)
    x = rand(shape, dtype, seed)
    for _ in range(2):  # second call exercises warm state
        y = roundtrip(c, x)
        assert y.shape == x.shape and y.dtype == x.dtype


@FAST
@given(shape=shapes, dtype=dtypes, seed=st.integers(0, 2 ** 16))
def test_none_is_exact(shape, dtype, seed):
    x = rand(shape, dtype, seed)
    assert torch.equal(roundtrip(make("none"), x), x)


@FAST
@given(shape=shapes, seed=st.integers(0, 2 ** 16))
def test_fp32_paths_exact(shape, seed):
    """fp16 is exact on fp16 input, bf16 on bf16 input, keep-all sparsifiers on any input."""
    for wire, dtype in (("fp16", torch.float16), ("bf16", torch.bfloat16)):
        x = rand(shape, dtype, seed)
        assert torch.equal(roundtrip(make(wire), x), x)
    x = rand(shape, torch.float32, seed)
    for name in names():
        if compressor_class(name).takes_ratio:
            assert torch.equal(roundtrip(make(name, ratio=1.0), x), x)
    assert torch.equal(roundtrip(make("threshold", threshold=0.0), x), x)


@FAST
@given(n=st.integers(1, 3000), ratio=st.floats(0.001, 1.0), seed=st.integers(0, 2 ** 16))
def test_topk_equals_torch_topk(n, ratio, seed):
    x = rand((n,), torch.float32, seed)
    c = make("topk", ratio=ratio)
    (idx, vals), ctx = c.compress(x, "t")
    k = idx.numel()
    assert k == max(1, int(np.ceil(ratio * n - 1e-9)))
    ref = torch.topk(x.abs(), k)
    assert set(idx.tolist()) == set(ref.indices.tolist())
    assert torch.equal(vals, x[idx.long()])


@FAST
@given(n=st.integers(1, 5000), ratio=st.floats(0.001, 1.0), seed=st.integers(0, 2 ** 16),
       trim=st.sampled_from(["topk", "first"]))
def test_thresholdv_emits_exactly_k(n, ratio, seed, trim):
    c = make("thresholdv", ratio=ratio, trim=trim)
    g = torch.Generator().manual_seed(seed)
    k = max(1, int(np.ceil(ratio * n - 1e-9)))
    for step in range(4):
        scale = float(torch.rand((), generator=g)) * 3 + 0.1  # magnitude shifts between steps
        x = torch.randn(n, generator=g) * scale
        (idx, vals), _ = c.compress(x, "t")
        assert idx.numel() == k
        assert len(set(idx.tolist())) == k
        assert torch.equal(vals, x[idx.long()])


@pytest.mark.parametrize("name", [n for n in names() if compressor_class(n).seeded])
def test_unbiased_quantizers(name):
    """Mean of ``draws`` decodings is within 5 standard errors of ``x`` elementwise.

    Per element the decoded value lies in an interval of width ``w`` (QSGD:
    ``||x|| / s``; TernGrad: ``max |x|``), so its standard deviation is at most
    ``w / 2`` and the mean of ``draws`` has standard error <= ``w / (2 sqrt(draws))``.
    """
    torch.manual_seed(0)
    x = torch.randn(64)
    c = make(name, levels=4) if name == "qsgd" else make(name)
    draws = 4000
    acc = torch.zeros(64, dtype=torch.float64)
    for _ in range(draws):
        p, ctx = c.compress(x, "t")
        acc += c.decompress(p, ctx).double()
    mean = acc / draws
    w = float(x.norm()) / 4 if name == "qsgd" else float(x.abs().max())
    bound = 5 * w / (2 * draws ** 0.5)
    assert float((mean - x.double()).abs().max()) <= bound
    assert c.unbiased


@pytest.mark.parametrize("name", names())
@FAST
@given(n=st.integers(0, 300), seed=st.integers(0, 2 ** 16))
def test_error_feedback_conservation(name, n, seed):
    """x + e_before == decoded + e_after: bitwise for sparsifiers, to one rounding otherwise."""
    c = make(name)
    mem = ErrorFeedback()
    g = torch.Generator().manual_seed(seed)
    shape = (n // 10, 10) if name == "powersgd" else (n,)
    for step in range(3):
        x = torch.randn(shape, generator=g)
        e_before = mem.residuals.get("t", torch.zeros(shape)).clone()
        acc_ref = x + e_before
        if c.kind == "lowrank":
            from hpcbench.collectives.compressed.powersgd import powersgd_gen
            from hpcbench.collectives.compressed._engine import run
            from hpcbench.collectives.transport import Transport
            acc = mem.compensate(x, "t")
            run(powersgd_gen(Transport(MPI.COMM_SELF), 7, acc, "t", c, mem))
            decoded = acc_ref - mem.residuals["t"]  # exercised for shape/finite below
            assert torch.allclose(decoded + mem.residuals["t"], acc_ref, atol=1e-5)
            continue
        acc = mem.compensate(x, "t")
        assert torch.equal(acc, acc_ref)
        payload, ctx = c.compress(acc, "t")
        decoded = c.decompress(payload, ctx)
        mem.update(acc, "t", c, payload, ctx)
        e_after = mem.residuals["t"]
        assert torch.equal(e_after, acc_ref - decoded)  # same dtype, same rounding
        if name in SPARSIFIERS or name == "none":
            assert torch.equal(decoded + e_after, acc_ref)
        else:
            err = (decoded.double() + e_after.double() - acc_ref.double()).abs()
            assert torch.all(err <= 2.0 ** -24 * (acc_ref.double() - decoded.double()).abs())


@FAST
@given(n=st.integers(2, 40), m=st.integers(2, 40), r=st.integers(1, 3), seed=st.integers(0, 2 ** 16))
def test_powersgd_exact_on_rank_r(n, m, r, seed):
    """A rank-r matrix comes back exactly (to float64 rounding) after one P/Q step on a size-1 comm."""
    g = torch.Generator().manual_seed(seed)
    M = (torch.randn(n, r, generator=g, dtype=torch.float64)
         @ torch.randn(r, m, generator=g, dtype=torch.float64))
    c = make("powersgd", rank=r)
    out = compressed_allreduce(M, "w", c, comm=MPI.COMM_SELF)
    assert torch.allclose(out, M, atol=1e-9 * max(1.0, float(M.abs().max())))


def test_wire_sizes():
    x = torch.randn(10000)
    assert payload_nbytes(make("fp16").compress(x, "a")[0]) == 20000
    assert payload_nbytes(make("topk", ratio=0.01).compress(x, "a")[0]) == 100 * 8
    assert payload_nbytes(make("randomk", ratio=0.01).compress(x, "a")[0]) == 100 * 4
    assert payload_nbytes(make("signsgd").compress(x, "a")[0]) == 1250
    assert payload_nbytes(make("terngrad").compress(x, "a")[0]) == 4 + 2500
    assert payload_nbytes(make("qsgd").compress(x, "a")[0]) == 4 + 10000


@pytest.mark.parametrize("bad", [0, -0.1, 1.5, float("nan"), "x"])
def test_bad_ratio_named(bad):
    with pytest.raises(ValueError, match="ratio"):
        check_ratio(bad)
    with pytest.raises(ValueError, match="ratio"):
        create("topk", ratio=bad)


def test_unknown_name_and_bad_args():
    with pytest.raises(ValueError, match="unknown compressor"):
        create("nope")
    with pytest.raises(ValueError, match="levels"):
        create("qsgd", levels=500)
    with pytest.raises(ValueError, match="rank"):
        create("powersgd", rank=0)
    with pytest.raises(ValueError, match="threshold"):
        create("threshold", threshold=-1)


def test_randomk_same_indices_for_same_name_and_step():
    a, b = make("randomk"), make("randomk")
    x = torch.randn(1000)
    _, ca = a.compress(x, "w")
    _, cb = b.compress(x * 2, "w")
    assert torch.equal(ca.extra["indices"], cb.extra["indices"])
    _, ca2 = a.compress(x, "w")
    assert not torch.equal(ca.extra["indices"], ca2.extra["indices"])


@pytest.mark.parametrize("name", ["topk", "thresholdv", "threshold", "dgc", "randomk"])
def test_sparse_residual_equals_dense_subtraction_with_non_finite(name):
    """The scatter-only residual (``v - v`` at the kept positions) is bitwise ``acc - decoded``,
    including kept inf (-> NaN) and a float64 tensor; and it works in place."""
    kw = {"threshold": 0.5} if name == "threshold" else {"ratio": 0.3}
    for dtype in (torch.float32, torch.float64):
        c = make(name, **kw)
        x = rand((300,), dtype, 5)
        x[[4, 9]] = torch.tensor([float("inf"), -float("inf")], dtype=dtype)
        acc = x.clone()
        payload, ctx = c.compress(acc, "t")
        expect = x - c.decompress(payload, ctx)
        got = c.residual(acc, payload, ctx)
        assert got.data_ptr() == acc.data_ptr()
        assert torch.equal(torch.isnan(got), torch.isnan(expect))
        fin = ~torch.isnan(expect)
        assert torch.equal(got[fin], expect[fin])
        if name == "topk":
            assert torch.isnan(got[[4, 9]]).all()          # inf - inf


def test_lr_scale_is_a_documented_per_method_attribute():
    """Every compressor carries a learning-rate multiplier in (0, 1]; the convergence check uses it."""
    from hpcbench.bench.compress.convergence import train

    for name in names():
        c = make(name)
        assert 0.0 < c.lr_scale <= 1.0, name
        if c.lr_scale != 1.0:                           # overridden: the reason is documented
            assert "lr_scale" in type(c).__doc__, name
    assert create("randomk", ratio=0.1).lr_scale == pytest.approx(0.2)
    assert create("randomk", ratio=0.1, scale=True).lr_scale == pytest.approx(0.02)
    assert create("randomk", ratio=0.9).lr_scale == 1.0
    assert create("signsgd").lr_scale < create("none").lr_scale
    r = train("signsgd", MPI.COMM_SELF, steps=2)
    assert r["lr_scale"] == create("signsgd").lr_scale
    assert train("signsgd", MPI.COMM_SELF, steps=2, lr_scale=0.7)["lr_scale"] == 0.7


def test_capabilities_match_the_constructors():
    """The declared capabilities agree with each class's constructor and the communicators."""
    import inspect

    from hpcbench.collectives.compressed import COMMUNICATORS

    for name in names():
        cls = compressor_class(name)
        params = inspect.signature(cls).parameters
        assert cls.takes_ratio == ("ratio" in params), name
        assert not cls.seeded or "seed" in params, name
        assert set(cls.ef_options) <= set(params), name
        assert cls.kind in COMMUNICATORS, name
        assert build(name, ratio=0.5, seed=3).name == name


def test_unknown_communication_pattern_raises():
    from hpcbench.collectives.compressed import compressed_allreduce
    from hpcbench.compress.none import NoneCompressor

    class Pigeon(NoneCompressor):
        name, kind = "pigeon", "carrier-pigeon"

    with pytest.raises(ValueError, match="carrier-pigeon"):
        compressed_allreduce(torch.ones(3), "t", Pigeon(), comm=MPI.COMM_SELF)
    with pytest.raises(TypeError):
        from hpcbench.compress import register
        register("pigeon-factory", lambda: Pigeon())

"""Compiled loops (Numba) against their numpy/torch paths: bitwise the same results."""

from __future__ import annotations

import contextlib

import numpy as np
import pytest
import torch
from hypothesis import given, settings, strategies as st

from hpcbench.collectives.compressed import _scatter
from hpcbench.collectives.compressed.sparse_sum import scatter_sum
from hpcbench.compress import ErrorFeedback, build, compressor_class, create, names
from hpcbench.compress import _scan
from hpcbench.compress._select import TopKSelector
from hpcbench.runtime import jit
from jittools import jit_off

pytestmark = pytest.mark.skipif(not jit.enabled(), reason="numba not installed")
SPECIAL = [0.0, -0.0, float("inf"), -float("inf"), float("nan"), 1e-45, -1e-45, 3e38]


def data(n, seed, dtype, specials):
    rng = np.random.default_rng(seed)
    a = rng.standard_normal(n).astype(dtype)
    if specials and n:
        pos = rng.integers(0, n, size=min(n, 12))
        a[pos] = rng.choice(np.array(SPECIAL, dtype=dtype), size=pos.size)
    return a


@settings(max_examples=60, deadline=None)
@given(n=st.integers(0, 3000), seed=st.integers(0, 2 ** 16), dtype=st.sampled_from([np.float32, np.float64]),
       specials=st.booleans(), add=st.booleans(), q=st.floats(0.0, 1.0), cap=st.integers(0, 400))
def test_scan_equals_numpy_chunks(n, seed, dtype, specials, add, q, cap):
    a = data(n, seed, dtype, specials)
    x = data(n, seed + 1, dtype, specials) if add else None
    itype = np.int32 if dtype == np.float32 else np.int64
    signless = itype(np.iinfo(itype).max)
    mags = a.view(itype) & signless
    t = np.sort(mags)[int(q * (n - 1))] if n else itype(0)
    a1, a2 = a.copy(), a.copy()
    ref = TopKSelector(chunk=64)._candidates(a1.view(itype), signless, t, a1, x)
    got = _scan.scan(a2, a2.view(itype), signless, t, cap, x)
    assert np.array_equal(a1.view(itype), a2.view(itype))        # the sums, bitwise
    assert np.array_equal(ref[0], got[0]) and np.array_equal(ref[1], got[1])
    assert got[0].dtype == np.int64 and got[1].dtype == itype


@settings(max_examples=30, deadline=None)
@given(n=st.integers(64, 5000), seed=st.integers(0, 2 ** 16), frac=st.floats(0.001, 0.125),
       dtype=st.sampled_from([torch.float32, torch.float64]))
def test_fused_select_equals_add_then_select(n, seed, frac, dtype):
    g = torch.Generator().manual_seed(seed)
    e, x = torch.randn(n, generator=g, dtype=dtype), torch.randn(n, generator=g, dtype=dtype)
    k = max(1, int(frac * n))
    acc = e + x
    ref = TopKSelector(min_numel=0, sample_size=256).select(acc.clone(), k)
    for off in (False, True):
        with jit_off() if off else contextlib.nullcontext():
            buf = e.clone()
            got = TopKSelector(min_numel=0, sample_size=256).select(buf, k, add=x)
        assert torch.equal(buf.view(torch.uint8), acc.view(torch.uint8))
        assert torch.equal(got[0], ref[0]) and torch.equal(got[1].view(torch.uint8), ref[1].view(torch.uint8))


def test_error_feedback_compress_equals_compensate_then_compress():
    """The fused entry point changes nothing, for every compressor, over several steps."""
    g = torch.Generator().manual_seed(3)
    xs = [torch.randn(70_000, generator=g) for _ in range(3)]
    for name in names():
        fused, split = build(name, seed=1), build(name, seed=1)
        m1, m2 = ErrorFeedback(), ErrorFeedback()
        for x in xs:
            acc1, p1, c1 = m1.compress(x, "w", fused)
            acc2 = m2.compensate(x, "w")
            p2, c2 = split.compress(acc2, "w")
            assert all(torch.equal(u.view(torch.uint8), v.view(torch.uint8)) for u, v in zip(p1, p2)), name
            m1.update(acc1, "w", fused, p1, c1)
            m2.update(acc2, "w", split, p2, c2)
            assert torch.equal(m1.residuals["w"].view(torch.uint8), m2.residuals["w"].view(torch.uint8)), name


@settings(max_examples=40, deadline=None)
@given(n=st.integers(1, 5000), k=st.integers(0, 3000), seed=st.integers(0, 2 ** 16),
       dtype=st.sampled_from([torch.float32, torch.float64]), wide=st.booleans())
def test_scatter_add_equals_index_add(n, k, seed, dtype, wide):
    g = torch.Generator().manual_seed(seed)
    idx = torch.randint(0, n, (k,), generator=g, dtype=torch.int64 if wide else torch.int32)
    vals = torch.randn(k, generator=g, dtype=dtype) * 1e3
    base = torch.randn(n, generator=g, dtype=dtype)
    ref = base.clone().index_add_(0, idx, vals)
    got = _scatter.scatter_add(base.clone(), idx, vals)
    assert torch.equal(ref.view(torch.uint8), got.view(torch.uint8))


def test_scatter_sum_uses_either_path_with_the_same_bits():
    g = torch.Generator().manual_seed(5)
    parts = [(torch.randint(0, 1000, (300,), generator=g), torch.randn(300, generator=g)) for _ in range(4)]
    a = scatter_sum(parts, torch.zeros(1000))
    with jit_off():
        assert not _scatter.supported(torch.zeros(3), torch.zeros(1, dtype=torch.long), torch.zeros(1))
        b = scatter_sum(parts, torch.zeros(1000))
    assert torch.equal(a.view(torch.uint8), b.view(torch.uint8))


def test_scatter_add_refuses_bad_input():
    out = torch.zeros(10)
    with pytest.raises(IndexError, match="10 elements"):
        _scatter.scatter_add(out, torch.tensor([1, 10]), torch.ones(2))
    with pytest.raises(IndexError, match="out of range"):
        _scatter.scatter_add(out, torch.tensor([-1]), torch.ones(1))
    with pytest.raises(ValueError, match="float32/64"):
        _scatter.scatter_add(out.to(torch.bfloat16), torch.tensor([1]), torch.ones(1, dtype=torch.bfloat16))
    with pytest.raises(ValueError, match="one shape"):
        _scatter.scatter_add(out, torch.tensor([1, 2]), torch.ones(3))


@settings(max_examples=60, deadline=None)
@given(c=st.integers(1, 3000), seed=st.integers(0, 2 ** 16), frac=st.floats(0.0, 1.0),
       dtype=st.sampled_from([np.float32, np.float64]), levels=st.sampled_from([0, 3, 50]))
def test_trim_equals_partition_trim(c, seed, frac, dtype, levels):
    """Radix-select trim == np.partition trim, ties at the k-th magnitude included."""
    rng = np.random.default_rng(seed)
    a = (rng.integers(-levels, levels + 1, size=c) if levels else rng.standard_normal(c)).astype(dtype)
    if c > 4:
        a[rng.integers(0, c, size=3)] = rng.choice(np.array(SPECIAL, dtype=dtype), size=3)
    itype = np.int32 if dtype == np.float32 else np.int64
    raw = a.view(itype)
    cand = np.sort(rng.choice(10 * c, size=c, replace=False)).astype(np.int64)
    k = max(1, int(frac * c))
    signless = itype(np.iinfo(itype).max)
    ref = TopKSelector._trim(cand, raw, signless, k)
    got = _scan.trim(cand, raw, signless, k)
    assert np.array_equal(ref[0], got[0]) and np.array_equal(ref[1], got[1])


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("feedback", [False, True])
def test_thresholdv_compiled_equals_numpy_path(dtype, feedback):
    """Same selections, thresholds and candidate counts over drifting steps (NaN included)."""
    g = torch.Generator().manual_seed(11)
    n, ratio = 50_000, 0.01
    base = torch.randn(n, generator=g, dtype=dtype)
    steps = [base * (1 + 0.2 * s) + torch.randn(n, generator=g, dtype=dtype) for s in range(6)]
    steps[3][[5, 77]] = float("nan")
    steps[4] = steps[4] * 0.3                        # far fewer candidates: the padding branch
    runs = []
    for off in (False, True):
        with jit_off() if off else contextlib.nullcontext():
            c, mem, out = create("thresholdv", ratio=ratio), ErrorFeedback(), []
            for x in steps:
                if feedback:
                    acc, p, ctx = mem.compress(x, "g", c)
                    mem.update(acc, "g", c, p, ctx)
                else:
                    p, _ = c.compress(x, "g")
                out.append((np.sort(p[0].numpy()), c.selector.threshold["g"], c.selector.last_candidates["g"]))
        runs.append(out)
    for (i1, t1, c1), (i2, t2, c2) in zip(*runs):
        assert np.array_equal(i1, i2) and t1 == t2 and c1 == c2

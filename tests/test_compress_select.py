"""Exact top-k by sampled threshold (``hpcbench.compress._select``) against ``torch.topk``."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from hypothesis import given, settings, strategies as st

from hpcbench.compress import create
from hpcbench.compress._select import TopKSelector

FAST = settings(max_examples=40, deadline=None)


def small_selector(**kw):
    """Fast path on tiny tensors: several chunks, a small sample (so retries happen)."""
    kw.setdefault("min_numel", 0)
    kw.setdefault("chunk", 64)
    kw.setdefault("sample_size", 128)
    return TopKSelector(**kw)


def assert_valid_topk(x: torch.Tensor, idx: torch.Tensor, k: int):
    """k distinct indices, and no unselected magnitude above a selected one (tie-robust)."""
    assert idx.dtype == torch.long and idx.numel() == k
    assert len(set(idx.tolist())) == k
    sel = torch.zeros(x.numel(), dtype=torch.bool)
    sel[idx] = True
    a = x.abs().double()
    if (~sel).any():
        assert float(a[sel].min()) >= float(a[~sel].max())


@FAST
@given(n=st.integers(8, 4000), frac=st.floats(0.0, 0.125), seed=st.integers(0, 2 ** 16),
       dtype=st.sampled_from([torch.float32, torch.float64]))
def test_same_set_as_torch_topk(n, frac, seed, dtype):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, generator=g, dtype=torch.float64).to(dtype)
    k = max(1, int(frac * n))
    s = small_selector()
    idx, vals = s.select(x, k)
    assert set(idx.tolist()) == set(torch.topk(x.abs(), k).indices.tolist())
    assert torch.equal(vals, x[idx])
    assert s.fallbacks == 0 or k * 8 > n


@FAST
@given(n=st.integers(8, 3000), frac=st.floats(0.0, 0.125), seed=st.integers(0, 2 ** 16),
       levels=st.integers(1, 6))
def test_ties_still_a_valid_topk(n, frac, seed, levels):
    """Few distinct magnitudes: the set may differ from torch's among ties, never in value."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randint(-levels, levels + 1, (n,), generator=g).float()
    k = max(1, int(frac * n))
    idx = small_selector()(x, k)
    assert_valid_topk(x, idx, k)
    assert torch.equal(idx, torch.sort(idx).values)   # fast path: ascending


def test_nan_and_inf_rank_like_torch_topk():
    x = torch.randn(5000, generator=torch.Generator().manual_seed(1))
    x[[3, 700, 4999]] = float("nan")
    x[[10, 11]] = torch.tensor([float("inf"), -float("inf")])
    idx = small_selector()(x, 40)
    chosen = set(idx.tolist())
    assert {3, 700, 4999, 10, 11} <= chosen
    assert chosen == set(torch.topk(x.abs(), 40).indices.tolist())


@pytest.mark.parametrize("kw", [{"sample_size": 1}, {"z": 0.0}, {"z": 0.0, "retries": 0},
                                {"sample_size": 2, "retries": 0}])
def test_a_bad_sample_never_changes_the_answer(kw):
    """Too small a sample or no margin: retries or the torch.topk fallback keep it exact."""
    g = torch.Generator().manual_seed(2)
    x = torch.randn(20000, generator=g)
    x[::997] *= 100.0                 # a few spikes the sample mostly misses
    s = small_selector(**kw)
    for k in (1, 7, 20, 300, 2500):
        idx = s(x, k)
        assert set(idx.tolist()) == set(torch.topk(x.abs(), k).indices.tolist())


def test_retry_and_fallback_counters():
    x = torch.randn(4096, generator=torch.Generator().manual_seed(3))
    s = small_selector(sample_size=1, retries=0)    # j > m at once: straight to torch.topk
    s(x, 100)
    assert s.fallbacks == 1 and s.last_candidates == 0
    s = small_selector()
    s(x, 100)
    assert s.fallbacks == 0 and s.last_candidates >= 100


def test_edge_sizes_and_dtypes():
    s = small_selector()
    x = torch.randn(100)
    assert s(x, 0).numel() == 0
    idx, vals = s.select(x, 500)
    assert torch.equal(idx, torch.arange(100)) and torch.equal(vals, x)
    for dtype in (torch.float16, torch.bfloat16):          # torch.topk path
        xh = x.to(dtype)
        assert set(s(xh, 9).tolist()) == set(torch.topk(xh.abs(), 9).indices.tolist())
    nc = torch.randn(40, 40)[:, ::2].reshape(-1)           # reshape copies: contiguous again
    assert set(s(nc, 30).tolist()) == set(torch.topk(nc.abs(), 30).indices.tolist())
    with pytest.raises(ValueError, match="z"):
        TopKSelector(z=-1.0)
    with pytest.raises(ValueError, match="sample_size"):
        TopKSelector(sample_size=0)


def test_default_selector_fast_path_on_a_large_tensor():
    """The real defaults (min_numel 65536): no torch.topk on the whole tensor, same set."""
    x = torch.randn(1 << 18, generator=torch.Generator().manual_seed(4))
    c = create("topk", ratio=0.01)
    (idx, vals), _ = c.compress(x, "g")
    k = math.ceil(0.01 * x.numel())
    assert c.selector.fallbacks == 0 and k <= c.selector.last_candidates < 2 * k
    assert set(idx.tolist()) == set(torch.topk(x.abs(), k).indices.tolist())
    assert torch.equal(vals, x[idx.long()])
    assert np.all(np.diff(idx.numpy()) > 0)

"""Wire encoding of sparse indices (``hpcbench.collectives.compressed.index_codec``)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from hpcbench.collectives.compressed import index_codec as ic


@settings(max_examples=80, deadline=None)
@given(numel=st.integers(1, 400_000), frac=st.floats(0.0, 1.0), seed=st.integers(0, 2 ** 16),
       wide=st.booleans())
def test_round_trip_is_exact(numel, frac, seed, wide):
    rng = np.random.default_rng(seed)
    k = int(frac * min(numel, 20_000))
    idx = np.sort(rng.choice(numel, size=k, replace=False)).astype(np.int64 if wide else np.int32)
    buf = ic.encode(idx, numel)
    assert buf.dtype == np.uint8 and buf.shape == (ic.index_nbytes(k, numel),)
    back = ic.decode(buf, k, numel)
    assert back.dtype == np.int32 and np.array_equal(back, idx)


def test_block_edges_and_empty_blocks():
    numel = 5 * ic.BLOCK + 17
    idx = np.array([0, ic.BLOCK - 1, ic.BLOCK, 3 * ic.BLOCK + 5, numel - 1] * 1, np.int64)
    idx = np.unique(np.concatenate([idx, np.arange(4 * ic.BLOCK, 4 * ic.BLOCK + 300)]))
    assert ic.blocked(idx.size, numel)
    assert np.array_equal(ic.decode(ic.encode(idx, numel), idx.size, numel), idx)


def test_sizes_of_the_benchmark_case():
    """1 % of 25M float32: 250k indices go as 2 bytes each plus 382 block counts."""
    numel, k = 25_000_000, 250_000
    assert ic.index_nbytes(k, numel) == 4 * 382 + 2 * k
    assert not ic.blocked(10, numel) and ic.index_nbytes(10, numel) == 40   # plain int32 is smaller


def test_sort_pairs_keeps_pairs_together():
    idx = np.array([7, 2, 9, 0], np.int32)
    vals = np.array([70, 20, 90, 0], np.int32)
    i2, v2 = ic.sort_pairs(idx, vals)
    assert i2.tolist() == [0, 2, 7, 9] and v2.tolist() == [0, 20, 70, 90]
    same = ic.sort_pairs(i2, v2)
    assert same[0] is i2 and same[1] is v2


def test_bad_input_is_refused():
    numel = 3 * ic.BLOCK
    idx = np.arange(0, numel, 7, dtype=np.int64)
    with pytest.raises(ValueError, match="ascending"):
        ic.encode(idx[::-1].copy(), numel)
    with pytest.raises(ValueError, match=r"\[0, "):
        ic.encode(idx + numel, numel)
    buf = ic.encode(idx, numel)
    with pytest.raises(ValueError, match="expected"):
        ic.decode(buf[:-2], idx.size, numel)
    bad = buf.copy()
    bad[:4].view(np.uint32)[0] += 1
    with pytest.raises(ValueError, match="add up"):
        ic.decode(bad, idx.size, numel)
    short = 2 * ic.BLOCK + 10                      # last block is partial: offsets can overflow it
    idx = np.concatenate([np.arange(0, 2 * ic.BLOCK, 5), np.arange(2 * ic.BLOCK, short)])
    over = ic.encode(idx, short)
    over[-2:].view(np.uint16)[0] = 60_000
    with pytest.raises(ValueError, match="numel"):
        ic.decode(over, idx.size, short)

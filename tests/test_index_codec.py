"""Wire encoding of sparse indices (Elias-Fano, ``hpcbench.collectives.compressed.index_codec``)."""

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


@pytest.mark.parametrize("numel,idx", [
    (1, [0]), (256, [255]), (257, [0, 256]), (70_000, list(range(0, 70_000, 3))),
    (2 ** 20, [0, 1, 2, 2 ** 20 - 1]), (3 * 65536 + 17, list(range(65530, 65546)) + [3 * 65536 + 16])])
def test_edges(numel, idx):
    idx = np.asarray(idx, np.int64)
    assert np.array_equal(ic.decode(ic.encode(idx, numel), idx.size, numel), idx)


def test_wide_tensors_use_int64_and_large_low_parts():
    numel = 2 ** 33
    idx = np.array([0, 5, 2 ** 32 + 7, numel - 1], np.int64)
    assert ic.low_bits(idx.size, numel) == 32
    back = ic.decode(ic.encode(idx, numel), idx.size, numel)
    assert back.dtype == np.int64 and np.array_equal(back, idx)


def test_sizes_of_the_benchmark_case():
    """1 % of 25M float32: 8 low bits per index plus a 347,657-bit unary high part."""
    numel, k = 25_000_000, 250_000
    assert ic.low_bits(k, numel) == 8
    assert ic.index_nbytes(k, numel) == k + (k + (numel - 1 >> 8) + 1 + 7) // 8 == 293_458
    assert ic.low_bits(10, numel) is None and ic.index_nbytes(10, numel) == 40   # plain int32 is smaller
    for k in (1, 10, 1000, 10 ** 5, 10 ** 6, numel):            # never larger than plain int32
        assert ic.index_nbytes(k, numel) <= 4 * k


def test_sort_pairs_keeps_pairs_together():
    idx = np.array([7, 2, 9, 0], np.int32)
    vals = np.array([70, 20, 90, 0], np.int32)
    i2, v2 = ic.sort_pairs(idx, vals)
    assert i2.tolist() == [0, 2, 7, 9] and v2.tolist() == [0, 20, 70, 90]
    same = ic.sort_pairs(i2, v2)
    assert same[0] is i2 and same[1] is v2


def test_bad_input_is_refused():
    numel = 3 * 65536
    idx = np.arange(0, numel, 7, dtype=np.int64)
    assert ic.low_bits(idx.size, numel) is not None
    with pytest.raises(ValueError, match="ascending"):
        ic.encode(idx[::-1].copy(), numel)
    with pytest.raises(ValueError, match="ascending"):
        ic.encode(np.array([0, 0, 1] + list(range(2, 3000)), np.int64), numel)
    with pytest.raises(ValueError, match=r"\[0, "):
        ic.encode(idx + numel, numel)
    buf = ic.encode(idx, numel)
    with pytest.raises(ValueError, match="expected"):
        ic.decode(buf[:-2], idx.size, numel)
    bad = buf.copy()
    nlow = idx.size * ic.low_bits(idx.size, numel) // 8
    zero = int(np.flatnonzero(np.unpackbits(bad[nlow:]) == 0)[0])
    bad[nlow + zero // 8] |= 0x80 >> (zero % 8)     # one more high-part bit
    with pytest.raises(ValueError, match="bits set"):
        ic.decode(bad, idx.size, numel)
    numel = 5000                                   # the last high bucket (4864..5119) is partial
    idx = np.arange(0, numel, 50, dtype=np.int64)
    assert ic.low_bits(idx.size, numel) == 8 and idx[-1] >> 8 == (numel - 1) >> 8
    over = ic.encode(idx, numel)
    over[idx.size - 1] = 255                       # low byte of the last index: 4864 + 255 >= 5000
    with pytest.raises(ValueError, match="numel"):
        ic.decode(over, idx.size, numel)

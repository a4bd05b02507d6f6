"""Wire encoding of a sparse payload's indices: Elias-Fano with a byte-aligned low part.

A top-k payload at 1 % of a 25M-element gradient is 250k int32 indices and
250k float32 values: as plain int32 the indices are half the bytes. Sorted,
distinct indices into ``n`` positions carry about ``log2(n / k) + 2`` bits
each, and the Elias-Fano representation (P. Elias, "Efficient storage and
retrieval by content and address of static files", J. ACM 1974; R. Fano,
MIT Project MAC memo 61, 1971) comes within a bit of that. Each index is
split into ``L`` low bits and the high part ``idx >> L``:

* ``low``: the low bits, ``k`` unsigned integers of ``L`` bits;
* ``high``: a bitmap of ``k + ((n - 1) >> L) + 1`` bits (packed, most
  significant bit first) with bit ``(idx_i >> L) + i`` set for the i-th
  index: the high parts in unary, as gaps.

Decoding is ``(flatnonzero(unpack(high)) - arange(k)) << L | low``: two
vectorised passes, no per-index loop. Here ``L`` is restricted to whole
bytes (0, 8, 16 or 32), so the low part is a plain uint8/uint16/uint32
array. The ``L`` with the fewest bytes is used, or the plain int32/int64
array when that is not larger (very small ``k``). The choice depends on
``(k, n)`` alone, so every rank knows every other rank's layout from its
count, and a fixed-size compressor's blocks stay fixed-size.

For the example above ``L = 8``: 250,000 B of low bytes plus a 43,470 B
bitmap, 1.17 B per index instead of 4, and a rank's whole top-k block
shrinks from 2.0 MB to 1.29 MB.
"""

from __future__ import annotations

import numpy as np

__all__ = ["low_bits", "index_nbytes", "encode", "decode", "sort_pairs"]

_LOW = {8: np.uint8, 16: np.uint16, 32: np.uint32}


def _plain_dtype(numel: int):
    return np.int32 if numel < 2 ** 31 else np.int64


def _high_bits(k: int, numel: int, L: int) -> int:
    return k + ((max(int(numel), 1) - 1) >> L) + 1


def _ef_nbytes(k: int, numel: int, L: int) -> int:
    return k * L // 8 + (_high_bits(k, numel, L) + 7) // 8


def low_bits(k: int, numel: int) -> int | None:
    """The Elias-Fano low-part width ``L`` used for ``k`` indices into ``numel`` elements, or None (plain)."""
    plain = k * np.dtype(_plain_dtype(numel)).itemsize
    best, size = None, plain
    for L in (0, 8, 16, 32):
        s = _ef_nbytes(k, numel, L)
        if s < size:
            best, size = L, s
    return best


def index_nbytes(k: int, numel: int) -> int:
    """Bytes on the wire of ``k`` indices into a tensor of ``numel`` elements."""
    L = low_bits(k, numel)
    if L is None:
        return k * np.dtype(_plain_dtype(numel)).itemsize
    return _ef_nbytes(k, numel, L)


def sort_pairs(idx: np.ndarray, values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(idx, values)`` reordered by ascending index (unchanged if already ascending).

    Indices within one payload are distinct, so the order does not change
    what the payload decodes to.
    """
    if idx.shape[0] < 2 or bool(np.all(idx[1:] > idx[:-1])):
        return idx, values
    order = np.argsort(idx, kind="stable")
    return idx[order], values[order]


def encode(idx: np.ndarray, numel: int) -> np.ndarray:
    """Indices (ascending, distinct, int32/int64, shape (k,)) -> wire bytes (uint8, ``index_nbytes``).

    Raises
    ------
    ValueError
        If an index is outside ``[0, numel)`` or the indices are not strictly
        ascending (Elias-Fano layouts only; :func:`sort_pairs` first).
    """
    k = int(idx.shape[0])
    if k and (int(idx[0]) < 0 or int(idx[-1]) >= numel):
        raise ValueError(f"indices must lie in [0, {numel}), got range [{int(idx[0])}, {int(idx[-1])}]")
    L = low_bits(k, numel)
    if L is None:
        return np.ascontiguousarray(idx, dtype=_plain_dtype(numel)).view(np.uint8).reshape(-1)
    if k > 1 and not bool(np.all(idx[1:] > idx[:-1])):
        raise ValueError("Elias-Fano index encoding needs strictly ascending indices")
    nlow = k * L // 8
    out = np.empty(_ef_nbytes(k, numel, L), np.uint8)
    wide = idx.astype(np.int64, copy=False)
    if L:
        out[:nlow].view(_LOW[L])[:] = wide & ((1 << L) - 1)
    bitmap = np.zeros(_high_bits(k, numel, L), bool)
    bitmap[(wide >> L) + np.arange(k)] = True
    out[nlow:] = np.packbits(bitmap)
    return out


def decode(buf: np.ndarray, k: int, numel: int) -> np.ndarray:
    """Wire bytes from :func:`encode` -> indices.

    Returns
    -------
    np.ndarray
        int32 (``numel < 2**31``) or int64, shape (k,), ascending for the
        Elias-Fano layouts.

    Raises
    ------
    ValueError
        If ``buf`` has the wrong size, its bitmap does not hold exactly ``k``
        set bits, or an index reaches ``numel``.
    """
    want = index_nbytes(k, numel)
    if buf.shape[0] != want:
        raise ValueError(f"index block of {buf.shape[0]} bytes, expected {want} for k={k}, numel={numel}")
    itype = _plain_dtype(numel)
    L = low_bits(k, numel)
    if L is None:
        return buf.view(itype)
    nlow = k * L // 8
    ones = np.flatnonzero(np.unpackbits(buf[nlow:], count=_high_bits(k, numel, L)).view(bool))
    if ones.shape[0] != k:
        raise ValueError(f"corrupt index block: {ones.shape[0]} high-part bits set, not {k}")
    idx = ones.astype(itype)
    np.subtract(idx, np.arange(k, dtype=itype), out=idx)
    if L:
        np.left_shift(idx, L, out=idx)
        np.bitwise_or(idx, buf[:nlow].view(_LOW[L]), out=idx, casting="unsafe")
    if k and int(idx.max()) >= numel:
        raise ValueError(f"corrupt index block: index {int(idx.max())} >= numel {numel}")
    return idx

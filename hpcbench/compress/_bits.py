"""Bit packing of sign and ternary codes for the quantizing compressors."""

from __future__ import annotations

import numpy as np
import torch

__all__ = ["pack_bits", "unpack_bits", "pack_2bit", "unpack_2bit", "float_input"]


def float_input(flat: torch.Tensor) -> torch.Tensor:
    """float32 (or float64) working copy of a flat floating tensor."""
    if flat.dtype in (torch.float32, torch.float64):
        return flat
    return flat.float()


def pack_bits(bits: torch.Tensor) -> torch.Tensor:
    """Boolean tensor of n entries -> uint8 tensor of ceil(n / 8) bytes (big-endian bit order)."""
    return torch.from_numpy(np.packbits(bits.numpy()))


def unpack_bits(packed: torch.Tensor, n: int) -> torch.Tensor:
    """Inverse of :func:`pack_bits`: uint8 bytes -> bool tensor of ``n`` entries."""
    return torch.from_numpy(np.unpackbits(packed.numpy(), count=n).astype(bool))


def pack_2bit(codes: torch.Tensor) -> torch.Tensor:
    """uint8 codes in {0, 1, 2, 3}, n entries -> ceil(n / 4) bytes, 4 codes per byte."""
    c = codes.numpy().astype(np.uint8, copy=False)
    n = c.shape[0]
    pad = (-n) % 4
    if pad:
        c = np.concatenate([c, np.zeros(pad, np.uint8)])
    c = c.reshape(-1, 4)
    out = c[:, 0] | (c[:, 1] << 2) | (c[:, 2] << 4) | (c[:, 3] << 6)
    return torch.from_numpy(np.ascontiguousarray(out, dtype=np.uint8))


def unpack_2bit(packed: torch.Tensor, n: int) -> torch.Tensor:
    """Inverse of :func:`pack_2bit`: -> uint8 codes of ``n`` entries."""
    p = packed.numpy()
    out = np.empty((p.shape[0], 4), np.uint8)
    for j in range(4):
        out[:, j] = (p >> (2 * j)) & 3
    return torch.from_numpy(out.reshape(-1)[:n].copy())

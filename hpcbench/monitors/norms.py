"""Squared L2 norms of gradients, fast enough to take at every step.

``torch.linalg.vector_norm(x, dtype=torch.float64)`` converts the whole
tensor to float64 first: 53 ms for ResNet-18's 11.7M gradients on one core,
about 4% of a 64x64, batch-32 training step on this machine, which is more
than a monitor meant to be left on may cost (KungFu's design goal). A plain
float32 norm of the whole tensor is 10x faster but loses about 1e-3 of
relative accuracy to float32 accumulation. :func:`sq_norm` takes float32
norms of chunks of ``CHUNK`` elements (each accurate to about 1e-7) and adds
their squares in float64: measured 5-8 ms for the same tensor, with a
relative error of about 2e-6 against the float64 sum.
"""

from __future__ import annotations

from typing import Iterable

import torch

__all__ = ["CHUNK", "sq_norm"]

#: elements per float32 partial norm
CHUNK = 1 << 18


def sq_norm(tensors: Iterable[torch.Tensor] | torch.Tensor) -> float:
    """``sum_t |t|_2^2`` over ``tensors`` (chunked float32 norms, squares summed in float64).

    Parameters
    ----------
    tensors : Tensor or iterable of Tensor
        Any shapes; floating dtypes. One tensor counts as one.

    Returns
    -------
    float
        The squared L2 norm of all elements, in (units of the tensors)^2;
        relative error about 1e-6 (see the module docstring); inf or NaN
        when an element is.
    """
    if isinstance(tensors, torch.Tensor):
        tensors = (tensors,)
    norms = []
    for t in tensors:
        flat = t.detach().reshape(-1)
        if flat.numel():
            norms.extend(torch.linalg.vector_norm(c) for c in flat.split(CHUNK))
    if not norms:
        return 0.0
    n = torch.stack(norms).to(torch.float64)
    return float(torch.dot(n, n))

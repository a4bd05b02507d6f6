"""Error feedback (residual memory) kept apart from compressors.

Stich et al., "Sparsified SGD with Memory" (NeurIPS 2018); Karimireddy et al.
(ICML 2019). Per tensor name the memory holds the residual ``e``:

.. code-block:: text

    acc      = x + e_before                 (compensate)
    payload  = compress(acc)
    e_after  = acc - decompress(payload)    (update)

Exactness. Both operations are evaluated in the tensor's dtype: ``acc =
fl(x + e_before)`` and ``e_after = fl(acc - decoded)`` elementwise, with
``decoded`` cast to that dtype. Hence ``decoded + e_after == acc`` holds
*exactly* (bitwise) wherever the subtraction is exact: where ``decoded`` is 0
or equal to ``acc`` (every sparsifier: kept entries leave 0, dropped entries
keep ``acc``), and by Sterbenz's lemma wherever ``acc / 2 <= decoded <= 2 acc``.
Elsewhere (quantizers) the one rounding of the subtraction bounds the
discrepancy: ``|decoded + e_after - acc| <= 2**-p * |acc - decoded|`` in exact
arithmetic, ``p`` the dtype's significand bits (24 for float32). Nothing else
is lost: ``sum over steps of decoded == sum of x + e_0 - e_T`` up to those
roundings.
"""

from __future__ import annotations

import torch

from hpcbench.compress.base import Compressor, Context, Payload

__all__ = ["ErrorFeedback", "NoMemory", "Memory"]


class Memory:
    """Interface: ``compensate`` before compressing, ``update`` after."""

    def compensate(self, tensor: torch.Tensor, name: str) -> torch.Tensor:
        raise NotImplementedError

    def compress(self, tensor: torch.Tensor, name: str,
                 compressor: Compressor) -> tuple[torch.Tensor, Payload, Context]:
        """``acc = compensate(tensor)`` and ``compressor.compress(acc)``; returns ``(acc, payload, ctx)``.

        ``acc`` is what :meth:`update` must be given afterwards.
        """
        acc = self.compensate(tensor, name)
        payload, ctx = compressor.compress(acc, name)
        return acc, payload, ctx

    def update(self, acc: torch.Tensor, name: str, compressor: Compressor, payload: Payload,
               ctx: Context) -> None:
        raise NotImplementedError


class NoMemory(Memory):
    """No error feedback: ``compensate`` returns the tensor itself."""

    def compensate(self, tensor, name):
        return tensor

    def update(self, acc, name, compressor, payload, ctx):
        return None


class ErrorFeedback(Memory):
    """Residual memory keyed by tensor name.

    Attributes
    ----------
    residuals : dict of str to torch.Tensor
        ``e`` per name, same shape and dtype as the tensor.
    """

    def __init__(self) -> None:
        self.residuals: dict[str, torch.Tensor] = {}

    def compensate(self, tensor: torch.Tensor, name: str) -> torch.Tensor:
        """``acc = tensor + e``, computed in place in the residual's buffer.

        The returned tensor *is* the memory's buffer (no allocation: first-touch
        page faults dominate on large gradients); it stays valid until
        :meth:`update`, which turns it into the next residual. ``tensor`` is
        not modified. (``e + x`` and ``x + e`` round identically.)

        Raises
        ------
        ValueError
            If the stored residual's shape or dtype differs from ``tensor``'s.
        """
        e = self._residual(tensor, name)
        if e is None:
            return tensor.detach().clone()
        return e.add_(tensor.detach())

    def _residual(self, tensor: torch.Tensor, name: str) -> torch.Tensor | None:
        """The stored residual of ``name`` (None before the first update), checked against ``tensor``."""
        e = self.residuals.get(name)
        if e is not None and (e.shape != tensor.shape or e.dtype != tensor.dtype):
            raise ValueError(f"tensor {name!r}: shape/dtype {tuple(tensor.shape)}/{tensor.dtype} "
                             f"differs from its residual's {tuple(e.shape)}/{e.dtype}")
        return e

    def compress(self, tensor: torch.Tensor, name: str,
                 compressor: Compressor) -> tuple[torch.Tensor, Payload, Context]:
        """Compensate and compress in one call: ``compressor.compress_accumulate(e, tensor)``.

        Bitwise the same as ``compressor.compress(self.compensate(tensor, name))``;
        a compressor may fuse ``e += tensor`` into its own pass over the data
        (top-k does). Returns ``(acc, payload, ctx)``, ``acc`` being the
        residual buffer that now holds ``tensor + e``. Raises ``ValueError``
        as :meth:`compensate` does.
        """
        e = self._residual(tensor, name)
        if e is None:
            return super().compress(tensor, name, compressor)
        payload, ctx = compressor.compress_accumulate(e, tensor, name)
        return e, payload, ctx

    def update(self, acc: torch.Tensor, name: str, compressor: Compressor, payload: Payload,
               ctx: Context) -> None:
        """Store ``e = acc - compressor.decompress(payload, ctx)`` (``acc`` may be reused)."""
        self.residuals[name] = compressor.residual(acc, payload, ctx)

    def reset(self) -> None:
        """Forget every residual."""
        self.residuals.clear()

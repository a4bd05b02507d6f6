"""The :class:`Compressor` interface shared by every gradient compressor.

Layering follows GRACE (Xu et al., 2021): a *compressor* turns one tensor into
a payload and back, a *memory* (:mod:`hpcbench.compress.memory`) adds error
feedback, and a *communicator* (:mod:`hpcbench.collectives.compressed`) moves
payloads between ranks. A compressor never communicates.

Conventions
-----------
* ``compress(tensor, name) -> (payload, ctx)``. ``payload`` is a tuple of flat,
  contiguous CPU tensors: exactly what travels on the wire. ``ctx`` is a
  :class:`Context` holding only value-independent metadata (shape, dtype,
  element count, step), so that any rank can decode any other rank's payload
  with its own ``ctx`` (same tensor name, same step).
* ``decompress(payload, ctx) -> tensor`` returns a tensor of ``ctx.shape`` and
  ``ctx.dtype``.
* ``ratio`` is always the fraction of elements **kept**, in (0, 1].
"""

from __future__ import annotations

import math
import zlib
from dataclasses import dataclass, field
from typing import Any

import torch

__all__ = ["Compressor", "Context", "Payload", "payload_nbytes", "check_ratio", "name_seed",
           "rounding_generator", "as_flat"]

#: what ``compress`` returns first: flat contiguous tensors, sent as-is
Payload = tuple


@dataclass
class Context:
    """Value-independent metadata needed to decode a payload.

    Attributes
    ----------
    shape : torch.Size
        Shape of the original tensor.
    dtype : torch.dtype
        Dtype of the original tensor.
    numel : int
        Number of elements of the original tensor.
    name : str
        Tensor name (key of per-tensor state).
    step : int
        How many times this compressor has compressed ``name`` before.
    extra : dict
        Compressor-specific, value-independent data (e.g. PowerSGD's local matrix).
    """

    shape: torch.Size
    dtype: torch.dtype
    numel: int
    name: str = ""
    step: int = 0
    extra: dict = field(default_factory=dict)


def payload_nbytes(payload: Payload) -> int:
    """Bytes that ``payload`` occupies on the wire (sum of its tensors' sizes)."""
    return int(sum(t.numel() * t.element_size() for t in payload))


def check_ratio(ratio: float) -> float:
    """Validate a kept fraction; raise ``ValueError`` naming the argument."""
    try:
        r = float(ratio)
    except (TypeError, ValueError):
        raise ValueError(f"ratio must be a number in (0, 1], got {ratio!r}") from None
    if not (0.0 < r <= 1.0) or math.isnan(r):
        raise ValueError(f"ratio must be in (0, 1] (fraction of elements kept), "
                         f"got {ratio!r}")
    return r


def name_seed(name: str, step: int, base: int = 0) -> int:
    """A 63-bit seed derived deterministically from ``(base, name, step)``.

    Identical on every rank, so shared random choices (random-k indices,
    PowerSGD's initial Q) agree without communication.
    """
    h = zlib.crc32(f"{base}/{name}/{step}".encode())
    return (h * 0x9E3779B97F4A7C15 + step + base) % (2 ** 63)


def rounding_generator(seed: int | None) -> torch.Generator:
    """Generator for stochastic rounding: seeded with ``seed``, or from OS entropy when None."""
    generator = torch.Generator()
    if seed is None:
        generator.seed()
    else:
        generator.manual_seed(int(seed))
    return generator


def as_flat(tensor: torch.Tensor) -> torch.Tensor:
    """``tensor`` as a flat contiguous view (a copy only if not contiguous)."""
    if not isinstance(tensor, torch.Tensor):
        raise TypeError(f"tensor must be a torch.Tensor, got {type(tensor).__name__}")
    return tensor.contiguous().view(-1)


class Compressor:
    """Base class of gradient compressors.

    Subclasses implement :meth:`compress` and :meth:`decompress` and set the
    class attributes below.

    Attributes
    ----------
    name : str
        Registry name.
    unbiased : bool
        True when ``E[decompress(compress(x))] == x`` over the compressor's
        randomness.
    fixed_size : bool
        True when the payload size depends only on the tensor's shape and dtype,
        never on its values (collectives can then skip exchanging sizes).
    kind : str
        Communication pattern: the key of the communicator that moves its
        payloads in :data:`hpcbench.collectives.compressed.COMMUNICATORS`
        (an unknown pattern raises there): ``"dense"`` (payload is a dense
        tensor that can be summed directly), ``"sparse"`` (payload is
        ``(indices, values)``; allgather or sparse ring), ``"shared_sparse"``
        (values only; every rank picks the same indices; ring allreduce),
        ``"quantized"`` (opaque; allgather and decode) or ``"lowrank"``
        (PowerSGD's two allreduces).
    takes_ratio : bool
        The constructor takes ``ratio`` (fraction of elements kept).
    seeded : bool
        The constructor takes ``seed`` for the compressor's own stochastic
        rounding, which must differ between ranks (runners pass a per-rank
        value). Seeds that must be equal on every rank (random-k's shared
        indices, PowerSGD's initial Q) keep their defaults and do not count.
    approximates_topk : bool
        It keeps about ``ratio`` of the elements, chosen to
        approximate the exact top-k by magnitude (or standing in for it), so
        its recall against ``torch.topk(|x|, k)`` is worth measuring.
    ef_options : dict
        Constructor options under which error feedback converges on the
        convergence check (:mod:`hpcbench.bench.compress.convergence`): it
        needs a contractive compressor, ``||x - C(x)|| < ||x||``.
    lr_scale : float
        Multiplier of plain SGD's learning rate that this compressor needs
        (with error feedback), > 0; 1.0 when the decoded update has the
        gradient's scale. Compressors whose decoded values are on another
        scale (signSGD: +-1 per element) or arrive delayed (random-k with
        error feedback) override it and say why. Used by the convergence
        check (:mod:`hpcbench.bench.compress.convergence`).
    """

    name: str = "base"
    unbiased: bool = False
    fixed_size: bool = True
    kind: str = "quantized"
    lr_scale: float = 1.0
    takes_ratio: bool = False
    seeded: bool = False
    approximates_topk: bool = False
    ef_options: dict = {}

    def __init__(self) -> None:
        self._steps: dict[str, int] = {}

    # -- helpers for subclasses ------------------------------------------------
    def _context(self, tensor: torch.Tensor, name: str, advance: bool = True) -> Context:
        step = self._steps.get(name, 0)
        if advance:
            self._steps[name] = step + 1
        return Context(shape=tensor.shape, dtype=tensor.dtype, numel=tensor.numel(), name=name,
                       step=step)

    # -- interface -------------------------------------------------------------
    def compress(self, tensor: torch.Tensor, name: str) -> tuple[Payload, Context]:
        """Compress ``tensor``.

        Parameters
        ----------
        tensor : torch.Tensor
            Any shape; floating dtype.
        name : str
            Key of per-tensor state (thresholds, warm starts, step counters).

        Returns
        -------
        payload : tuple of torch.Tensor
            Flat contiguous tensors that travel on the wire.
        ctx : Context
            Value-independent metadata for :meth:`decompress`.
        """
        raise NotImplementedError

    def decompress(self, payload: Payload, ctx: Context) -> torch.Tensor:
        """Rebuild a tensor of ``ctx.shape`` and ``ctx.dtype`` from ``payload``."""
        raise NotImplementedError

    def compress_accumulate(self, acc: torch.Tensor, tensor: torch.Tensor,
                            name: str) -> tuple[Payload, Context]:
        """``acc += tensor`` in place, then :meth:`compress` ``acc``.

        Error feedback's entry point (``acc`` is the residual buffer). The
        result is bitwise that of ``compress(acc.add_(tensor), name)``;
        compressors that read the whole tensor once anyway (top-k) override it
        to fuse the addition into that pass.

        Parameters
        ----------
        acc : torch.Tensor
            Contiguous, ``tensor``'s shape and dtype; overwritten with the sum.
        tensor : torch.Tensor
            The new contribution (not modified).
        name : str
            As for :meth:`compress`.

        Raises
        ------
        ValueError
            If ``acc`` and ``tensor`` differ in shape or dtype.
        """
        self._check_accumulate(acc, tensor)
        return self.compress(acc.add_(tensor.detach()), name)

    @staticmethod
    def _check_accumulate(acc: torch.Tensor, tensor: torch.Tensor) -> None:
        """Raise ``ValueError`` unless ``acc`` and ``tensor`` share shape and dtype."""
        if acc.shape != tensor.shape or acc.dtype != tensor.dtype:
            raise ValueError(f"compress_accumulate: acc {tuple(acc.shape)}/{acc.dtype} and tensor "
                             f"{tuple(tensor.shape)}/{tensor.dtype} differ in shape or dtype")

    def residual(self, acc: torch.Tensor, payload: Payload, ctx: Context) -> torch.Tensor:
        """``acc - decompress(payload, ctx)`` computed in ``acc.dtype``.

        Subclasses may override with a faster path that is bitwise identical
        (sparsifiers zero the kept entries instead of materialising the dense
        decoded tensor). ``acc`` may be overwritten.
        """
        return acc - self.decompress(payload, ctx).to(acc.dtype)

    def state_dict(self) -> dict[str, Any]:
        """Per-name state (for checkpoints and tests)."""
        return {"steps": dict(self._steps)}

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"

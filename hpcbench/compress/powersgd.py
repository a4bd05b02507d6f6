"""PowerSGD low-rank compression (Vogels et al., 2019), compressor half.

The two allreduces of a PowerSGD step belong to the communicator
(:func:`hpcbench.collectives.compressed.powersgd_allreduce`); this class only
holds the per-tensor state and the local algebra:

1. :meth:`compress` -> payload ``(P,)`` with ``P = M Q`` (``M`` the tensor
   viewed as an ``n x m`` matrix, ``Q`` the warm-started ``m x r`` factor);
2. communicator: ``P_sum = allreduce(P)``; :meth:`orthogonalize` -> ``P_hat``;
3. :meth:`project` -> ``Q_local = M^T P_hat`` (this rank's Q-stage payload);
4. communicator: ``Q_sum = allreduce(Q_local)``; :meth:`finish` stores
   ``Q_sum`` as next step's warm start and returns ``P_hat Q_sum^T``.

This rank's decoded contribution is ``P_hat Q_local^T = P_hat P_hat^T M``
(``decompress((P_hat, Q_local), ctx)``); the contributions sum to
``P_hat Q_sum^T`` exactly in real arithmetic, and error feedback uses it.
"""

from __future__ import annotations

import torch

from hpcbench.compress.base import Compressor, Context, Payload, as_flat, name_seed

__all__ = ["PowerSGDCompressor"]


class PowerSGDCompressor(Compressor):
    """Rank-``r`` power-iteration compressor with warm start.

    Vogels et al., "PowerSGD: Practical Low-Rank Gradient Compression for
    Distributed Optimization" (NeurIPS 2019). A tensor of shape
    ``(n, d1, d2, ...)`` is viewed as ``n x m`` with ``m = d1 * d2 * ...``.
    Tensors with fewer than 2 dimensions, or where rank ``r`` would not save
    bytes (``r (n + m) >= n m``), go uncompressed (``ctx.extra["mode"] ==
    "dense"``, payload ``(flat,)``).

    Parameters
    ----------
    rank : int, default 2
        Rank ``r`` >= 1 of the approximation.
    seed : int, default 0
        Seed of the initial ``Q`` (equal on all ranks; derived per tensor name).
    warm_start : bool, default True
        Reuse last step's ``Q`` (else draw a fresh one every step).
    """

    name = "powersgd"
    unbiased = False
    fixed_size = True
    kind = "lowrank"
    ef_options = {"rank": 2}

    def __init__(self, rank: int = 2, seed: int = 0, warm_start: bool = True) -> None:
        super().__init__()
        if int(rank) != rank or rank < 1:
            raise ValueError(f"rank must be an integer >= 1, got {rank!r}")
        self.rank = int(rank)
        self.seed = int(seed)
        self.warm_start = bool(warm_start)
        self.q_memory: dict[str, torch.Tensor] = {}

    def _work(self, dtype: torch.dtype) -> torch.dtype:
        return torch.float64 if dtype == torch.float64 else torch.float32

    def compress(self, tensor: torch.Tensor, name: str) -> tuple[Payload, Context]:
        ctx = self._context(tensor, name)
        if tensor.dim() < 2 or self.rank * (tensor.shape[0] + tensor.numel() // max(tensor.shape[0], 1)) \
                >= tensor.numel():
            ctx.extra["mode"] = "dense"
            return (as_flat(tensor),), ctx
        work = self._work(tensor.dtype)
        n = tensor.shape[0]
        m = tensor.numel() // n
        M = tensor.reshape(n, m).to(work)
        Q = self.q_memory.get(name)
        if Q is None or not self.warm_start or Q.shape != (m, self.rank) or Q.dtype != work:
            g = torch.Generator().manual_seed(name_seed(name, 0 if self.warm_start else ctx.step, self.seed))
            Q = torch.randn(m, self.rank, generator=g, dtype=work)
        ctx.extra.update(mode="lowrank", M=M, Q=Q, n=n, m=m)
        return ((M @ Q).contiguous().view(-1),), ctx

    def orthogonalize(self, p_sum: torch.Tensor, ctx: Context) -> torch.Tensor:
        """Orthonormal columns spanning ``P_sum`` (reduced QR); shape ``(n, r)``."""
        P = p_sum.view(ctx.extra["n"], self.rank)
        return torch.linalg.qr(P, mode="reduced").Q.contiguous()

    def project(self, p_hat: torch.Tensor, ctx: Context) -> torch.Tensor:
        """This rank's Q-stage payload ``M^T P_hat``, flattened ``(m * r,)``."""
        return (ctx.extra["M"].T @ p_hat).contiguous().view(-1)

    def finish(self, p_hat: torch.Tensor, q_sum: torch.Tensor, ctx: Context) -> torch.Tensor:
        """Store the warm start and return the aggregate ``P_hat Q_sum^T`` (tensor's shape/dtype)."""
        Q = q_sum.view(ctx.extra["m"], self.rank)
        self.q_memory[ctx.name] = Q.clone()
        return (p_hat @ Q.T).to(ctx.dtype).reshape(ctx.shape)

    def decompress(self, payload: Payload, ctx: Context) -> torch.Tensor:
        """Dense mode: ``payload = (flat,)``; low-rank: ``payload = (P_hat, Q)`` -> ``P_hat Q^T``."""
        if ctx.extra.get("mode") == "dense":
            return payload[0].to(ctx.dtype).reshape(ctx.shape)
        p_hat, q = payload
        P = p_hat.reshape(ctx.extra["n"], self.rank)
        Q = q.reshape(ctx.extra["m"], self.rank)
        return (P @ Q.T).to(ctx.dtype).reshape(ctx.shape)

    def __repr__(self) -> str:
        return f"PowerSGDCompressor(rank={self.rank})"

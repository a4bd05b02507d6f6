"""Compressed client updates and model broadcasts, with client-side error feedback.

A client's update (local minus start parameters) is compressed tensor by
tensor (one payload per model parameter, as GRACE and Horovod compress per
tensor) by any compressor of :mod:`hpcbench.compress`; the server aggregates
the decoded update. With error feedback (Stich et al., "Sparsified SGD with
Memory", NeurIPS 2018; Karimireddy et al., ICML 2019) each client keeps its
residual ``e``: it sends ``C(delta + e)`` and keeps ``delta + e - D(C(delta + e))``
(:class:`hpcbench.compress.memory.ErrorFeedback`).

Where the state lives. The residual belongs to the client; the emulation
keeps every client's residual in one :class:`UpdateCodec` on the aggregator
rank and encodes the updates there, in a fixed order, so the result does not
depend on which executor trained a client nor on the world size. Residuals
exist only for clients that have participated, and at most ``max_residuals``
of them are kept: the least recently used client's residual is dropped (that
client starts again from ``e = 0``, as a newly registered one), which bounds
the memory at ``max_residuals x P x 4`` bytes. Per-tensor compressor state
(step counters, PowerSGD's warm start) is shared by all clients, as one codec
on the server would hold it; a device holding its own would differ.

Downlink. The server sends the global model as the downlink compressor
encodes it (the clients start from the decoded model); there is no error
feedback downstream, since each broadcast is a whole model, not an update.
Suited to quantizers (``fp16``, ``bf16``, ``qsgd``).
"""

from __future__ import annotations

from collections import OrderedDict

import numpy as np
import torch

from hpcbench.compress.base import payload_nbytes
from hpcbench.compress.memory import ErrorFeedback
from hpcbench.fl.config_compression import build_compressor

__all__ = ["UpdateCodec", "model_tensors"]


def model_tensors(model: torch.nn.Module) -> list[tuple[str, tuple[int, ...]]]:
    """``(name, shape)`` of each parameter, in the flat vector's order (``parameters_to_vector``)."""
    return [(name, tuple(p.shape)) for name, p in model.named_parameters()]


class UpdateCodec:
    """Compress flat float32 vectors tensor by tensor; optional per-client error feedback.

    Parameters
    ----------
    section : hpcbench.fl.config_compression.CompressionConfig
        Compressor name, ``ratio`` and ``options``; an ``error_feedback`` and
        ``max_residuals`` attribute (uplink sections) turn on residuals.
    tensors : list of (str, tuple of int)
        Parameter names and shapes; their sizes sum to ``P``.
    seed : int
        Passed to seeded compressors (stochastic rounding).

    Attributes
    ----------
    wire_bytes : int
        Bytes one encoded vector occupies on the wire (sum of payload sizes;
        fixed for the compressors a section accepts).
    """

    def __init__(self, section, tensors: list[tuple[str, tuple[int, ...]]], seed: int) -> None:
        self.section = section
        self.tensors = list(tensors)
        self.seed = int(seed)
        self.sizes = [int(np.prod(shape, dtype=np.int64)) for _, shape in self.tensors]
        self.compressor = build_compressor(section, self.seed)
        # ``none`` leaves no error to feed back: no residual is kept for it
        self.error_feedback = bool(getattr(section, "error_feedback", False)) and section.name != "none"
        self.max_residuals = int(getattr(section, "max_residuals", 0))
        self._memories: OrderedDict[int, ErrorFeedback] = OrderedDict()
        probe = build_compressor(section, self.seed)  # a fresh one: the real codec's state is untouched
        gen = torch.Generator().manual_seed(0)
        self.wire_bytes = sum(payload_nbytes(probe.compress(torch.randn(shape, generator=gen), name)[0])
                              for name, shape in self.tensors)

    @property
    def num_parameters(self) -> int:
        """``P``, the length of the vectors encoded."""
        return sum(self.sizes)

    def encode(self, flat: np.ndarray, client_id: int | None = None) -> tuple[np.ndarray, int]:
        """What the receiver decodes from ``flat``, and the bytes it travelled as.

        Parameters
        ----------
        flat : ndarray of shape (P,), float32
            A client's update (uplink) or the global model (downlink); not modified.
        client_id : int, optional
            Whose residual to use and update (error feedback only).

        Returns
        -------
        decoded : ndarray of shape (P,), float32
        nbytes : int
            Sum of the payloads' sizes.

        Raises
        ------
        ValueError
            If ``flat`` is not of length ``P``, or error feedback is on and
            ``client_id`` is None.
        """
        flat = np.asarray(flat, dtype=np.float32)
        if flat.shape != (self.num_parameters,):
            raise ValueError(f"expected a flat vector of {self.num_parameters} values, got shape {flat.shape}")
        memory = None
        if self.error_feedback:
            if client_id is None:
                raise ValueError("error feedback needs the client id")
            memory = self._memory(int(client_id))
        out = np.empty_like(flat)
        source = torch.from_numpy(flat)
        nbytes = 0
        lo = 0
        for (name, shape), size in zip(self.tensors, self.sizes):
            part = source[lo:lo + size].reshape(shape)
            if memory is None:
                payload, ctx = self.compressor.compress(part, name)
            else:
                acc, payload, ctx = memory.compress(part, name, self.compressor)
            decoded = self.compressor.decompress(payload, ctx)
            if memory is not None:
                memory.update(acc, name, self.compressor, payload, ctx)
            out[lo:lo + size] = decoded.reshape(-1).to(torch.float32).numpy()
            nbytes += payload_nbytes(payload)
            lo += size
        return out, nbytes

    def _memory(self, client_id: int) -> ErrorFeedback:
        """The client's residual memory, most recently used now; evicts the LRU one beyond the cap."""
        memory = self._memories.pop(client_id, None)
        if memory is None:
            memory = ErrorFeedback()
        self._memories[client_id] = memory
        while len(self._memories) > self.max_residuals:
            self._memories.popitem(last=False)
        return memory

    def residual_clients(self) -> list[int]:
        """Clients holding a residual, least recently used first."""
        return list(self._memories)

    def state_dict(self) -> dict:
        """Residuals (client id -> parameter name -> float32 ndarray, LRU order) and compressor state.

        A checkpoint can store it as is. With deterministic compressors
        (``none``, ``fp16``, ``bf16``, ``topk``, ...) :meth:`load_state_dict`
        continues bit for bit. The compressor part is
        :meth:`hpcbench.compress.base.Compressor.state_dict`, which holds step
        counters only: the position of a seeded compressor's rounding
        generator (``qsgd``, ``terngrad``) and PowerSGD's warm-start ``Q`` are
        not exposed by :mod:`hpcbench.compress` yet, so those resume from a
        fresh generator / ``Q``.
        """
        return {"residuals": {cid: {name: e.numpy().copy() for name, e in mem.residuals.items()}
                              for cid, mem in self._memories.items()},
                "compressor": self.compressor.state_dict()}

    def load_state_dict(self, state: dict) -> None:
        """Restore residuals from :meth:`state_dict` (compressor step counters too)."""
        self._memories.clear()
        for cid, residuals in state["residuals"].items():
            mem = ErrorFeedback()
            mem.residuals = {name: torch.from_numpy(np.array(e, dtype=np.float32)) for name, e in residuals.items()}
            self._memories[int(cid)] = mem
        steps = state.get("compressor", {}).get("steps")
        if steps is not None:
            self.compressor._steps = dict(steps)

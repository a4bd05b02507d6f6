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
        """Residuals, compressor step counters, generator positions and PowerSGD's warm start.

        ``residuals``: client id -> parameter name -> float32 ndarray, in LRU
        order; ``compressor``: :meth:`hpcbench.compress.base.Compressor.state_dict`
        (step counters); ``generators``: the state (uint8 ndarray,
        ``torch.Generator.get_state``) of every ``torch.Generator`` the
        compressor holds, directly or in one of its attributes (the stochastic
        rounding of ``qsgd`` and ``terngrad``, top-k's sampled threshold),
        by attribute path; ``q_memory``: PowerSGD's warm-start ``Q`` per
        parameter name (float ndarray), when the compressor keeps one. With
        these, :meth:`load_state_dict` continues bit for bit.
        """
        q_memory = getattr(self.compressor, "q_memory", None)
        return {"residuals": {cid: {name: e.numpy().copy() for name, e in mem.residuals.items()}
                              for cid, mem in self._memories.items()},
                "compressor": self.compressor.state_dict(),
                "generators": {path: g.get_state().numpy().copy()
                               for path, g in _generators(self.compressor).items()},
                "q_memory": None if q_memory is None else {k: q.numpy().copy() for k, q in q_memory.items()}}

    def load_state_dict(self, state: dict) -> None:
        """Restore :meth:`state_dict`'s output (the keys after ``residuals`` are optional).

        Raises
        ------
        ValueError
            A saved generator that this compressor does not hold.
        """
        self._memories.clear()
        for cid, residuals in state["residuals"].items():
            mem = ErrorFeedback()
            mem.residuals = {name: torch.from_numpy(np.array(e, dtype=np.float32)) for name, e in residuals.items()}
            self._memories[int(cid)] = mem
        steps = state.get("compressor", {}).get("steps")
        if steps is not None:
            self.compressor._steps = dict(steps)
        mine = _generators(self.compressor)
        for path, gen_state in (state.get("generators") or {}).items():
            if path not in mine:
                raise ValueError(f"codec state has generator {path!r}; {self.section.name} holds {sorted(mine)}")
            mine[path].set_state(torch.from_numpy(np.array(gen_state, dtype=np.uint8)))
        if state.get("q_memory") is not None and hasattr(self.compressor, "q_memory"):
            self.compressor.q_memory = {k: torch.from_numpy(np.array(q)) for k, q in state["q_memory"].items()}


def _generators(obj, depth: int = 1) -> dict[str, torch.Generator]:
    """``torch.Generator`` attributes of ``obj`` and, ``depth`` levels down, of its attributes (by dotted path)."""
    out = {}
    for key, value in vars(obj).items():
        if isinstance(value, torch.Generator):
            out[key] = value
        elif depth > 0 and hasattr(value, "__dict__") and not isinstance(value, (torch.Tensor, type)):
            out.update({f"{key}.{k}": g for k, g in _generators(value, depth - 1).items()})
    return out

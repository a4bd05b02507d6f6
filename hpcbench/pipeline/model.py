"""A BERT-style encoder stack built from torch's own layers, as a list of pipeline layers.

Pipeline layers, in order: :class:`Embedding` (token + position embeddings,
LayerNorm), ``L`` ``torch.nn.TransformerEncoderLayer`` (post-norm, GELU,
feed-forward ``4 * hidden``, no dropout so that split and unsplit runs agree
bit for bit up to float rounding), :class:`Pooler` (first token, Linear,
tanh) and a ``Linear`` classifier. Batches are synthetic token sequences
whose label is a function of the tokens (learnable, no download).
"""

from __future__ import annotations

import torch
from torch import nn

from hpcbench.pipeline.config import ModelConfig

__all__ = ["Embedding", "Pooler", "build_layers", "parameter_count", "memory_need", "activation_shape",
           "synthetic_batch"]


class Embedding(nn.Module):
    """Token and position embeddings with LayerNorm: ``(B, S) int64 -> (B, S, H) float32``."""

    def __init__(self, vocab: int, seq_len: int, hidden: int) -> None:
        super().__init__()
        self.tokens = nn.Embedding(vocab, hidden)
        self.positions = nn.Embedding(seq_len, hidden)
        self.norm = nn.LayerNorm(hidden)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        pos = torch.arange(ids.shape[1], device=ids.device)
        return self.norm(self.tokens(ids) + self.positions(pos)[None])


class Pooler(nn.Module):
    """BERT's pooler: ``tanh(W h[:, 0] + b)``, ``(B, S, H) -> (B, H)``."""

    def __init__(self, hidden: int) -> None:
        super().__init__()
        self.dense = nn.Linear(hidden, hidden)

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        return torch.tanh(self.dense(h[:, 0]))


def build_layers(cfg: ModelConfig, seed: int) -> list[nn.Module]:
    """All ``cfg.layers + 3`` pipeline layers, initialised from ``seed`` (identical on every rank)."""
    torch.manual_seed(seed)
    layers: list[nn.Module] = [Embedding(cfg.vocab, cfg.seq_len, cfg.hidden)]
    for _ in range(cfg.layers):
        layers.append(nn.TransformerEncoderLayer(cfg.hidden, cfg.heads, 4 * cfg.hidden, dropout=0.0,
                                                 activation="gelu", batch_first=True))
    layers += [Pooler(cfg.hidden), nn.Linear(cfg.hidden, cfg.classes)]
    return layers


def parameter_count(cfg: ModelConfig) -> int:
    """Parameters of all pipeline layers of :func:`build_layers` (counted, nothing built).

    Embedding ``(vocab + seq_len) h``; each encoder layer ``12 h^2 + 13 h``
    (attention's input projection ``3h^2 + 3h`` and output ``h^2 + h``, the
    ``4h`` feed-forward ``8h^2 + 5h``, two layer norms ``4h``); pooler
    ``h^2 + h``; classifier ``h classes + classes``.
    """
    h = cfg.hidden
    return ((cfg.vocab + cfg.seq_len) * h + cfg.layers * (12 * h * h + 13 * h) + h * h + h
            + h * cfg.classes + cfg.classes)


def memory_need(cfg, micro_batch: int, builds: bool):
    """A rank's estimated peak memory (:class:`~hpcbench.runtime.memory.MemoryNeed`): ``builds`` -- it holds
    every layer (rank 0 profiles them all; with real compute every rank builds them) -- its weights and
    gradients (8 bytes per parameter) plus one layer's activations for a micro-batch; else nothing."""
    from hpcbench.runtime.memory import MemoryNeed

    m = cfg.model
    keys = f"model.layers={m.layers}, model.hidden={m.hidden}, model.seq_len={m.seq_len}, model.vocab={m.vocab}"
    if not builds:
        return MemoryNeed(0, keys)
    activations = 4 * micro_batch * m.seq_len * (8 * m.hidden + m.heads * m.seq_len)
    return MemoryNeed(8 * parameter_count(m) + activations, keys)


def activation_shape(cfg: ModelConfig, layer: int, micro_batch: int) -> tuple[int, ...]:
    """Shape of the output of pipeline layer ``layer`` for a micro-batch (float32)."""
    n = cfg.layers + 3
    if layer < n - 2:
        return (micro_batch, cfg.seq_len, cfg.hidden)
    if layer == n - 2:
        return (micro_batch, cfg.hidden)
    return (micro_batch, cfg.classes)


def synthetic_batch(cfg: ModelConfig, batch_size: int, seed: int, step: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Token ids ``(B, S) int64`` and labels ``(B,) int64``; the label is ``(ids[:, 1] + ids[:, 2]) mod classes``."""
    g = torch.Generator().manual_seed(seed * 1_000_003 + step)
    ids = torch.randint(0, cfg.vocab, (batch_size, cfg.seq_len), generator=g)
    return ids, (ids[:, 1] + ids[:, 2]) % cfg.classes

"""Character-level LSTM for next-character prediction (LEAF's Shakespeare model, smaller)."""

from __future__ import annotations

import torch
from torch import nn

from hpcbench.fl.contracts import FLModel

__all__ = ["CharLSTM"]


class CharLSTM(nn.Module, FLModel):
    """Embedding -> LSTM -> linear over the vocabulary, predicting at every position.

    LEAF uses an 8-dim embedding and two 256-unit LSTM layers; the defaults here
    (8, one layer of 64) keep CPU emulation of hundreds of clients practical.

    Input int64 of shape (B, T); output logits of shape (B, T, vocab_size).
    """

    input_kind = "tokens"

    def __init__(self, vocab_size: int, embedding: int, hidden: int, layers: int) -> None:
        super().__init__()
        self.embed = nn.Embedding(vocab_size, embedding)
        self.lstm = nn.LSTM(embedding, hidden, num_layers=layers, batch_first=True)
        self.head = nn.Linear(hidden, vocab_size)

    @classmethod
    def build(cls, cfg, dataset) -> "CharLSTM":
        """``model.embedding``, ``model.hidden`` and ``model.layers`` over the dataset's vocabulary."""
        return cls(dataset.num_classes, cfg.embedding, cfg.hidden, cfg.layers)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out, _ = self.lstm(self.embed(x))
        return self.head(out)

    @staticmethod
    def loss(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        """Mean cross-entropy over every position."""
        return nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))

    @staticmethod
    def sample_losses(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        """Each sequence's mean cross-entropy over its positions, shape (B,)."""
        per_position = nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1),
                                                   reduction="none")
        return per_position.reshape(targets.shape[0], -1).mean(dim=1)

"""Character-level LSTM for next-character prediction (LEAF's Shakespeare model, smaller)."""

from __future__ import annotations

import torch
from torch import nn

__all__ = ["CharLSTM"]


class CharLSTM(nn.Module):
    """Embedding -> LSTM -> linear over the vocabulary, predicting at every position.

    LEAF uses an 8-dim embedding and two 256-unit LSTM layers; the defaults here
    (8, one layer of 64) keep CPU emulation of hundreds of clients practical.

    Input int64 of shape (B, T); output logits of shape (B, T, vocab_size).
    """

    def __init__(self, vocab_size: int, embedding: int, hidden: int, layers: int) -> None:
        super().__init__()
        self.embed = nn.Embedding(vocab_size, embedding)
        self.lstm = nn.LSTM(embedding, hidden, num_layers=layers, batch_first=True)
        self.head = nn.Linear(hidden, vocab_size)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out, _ = self.lstm(self.embed(x))
        return self.head(out)

    @staticmethod
    def loss(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        """Mean cross-entropy over every position."""
        return nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))

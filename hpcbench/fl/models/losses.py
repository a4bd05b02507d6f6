"""The cross-entropy objective of every classifier that maps inputs to one row of logits per example."""

from __future__ import annotations

import torch
from torch import nn

__all__ = ["Classifier"]


class Classifier:
    """Mixin giving :class:`hpcbench.fl.contracts.FLModel`'s ``loss`` and ``sample_losses`` for logits (B, K)."""

    @staticmethod
    def loss(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        """Mean cross-entropy."""
        return nn.functional.cross_entropy(logits, targets)

    @staticmethod
    def sample_losses(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        """Cross-entropy of each example, shape (B,)."""
        return nn.functional.cross_entropy(logits, targets, reduction="none")

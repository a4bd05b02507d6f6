"""The two small models of the bundled 8x8 digits (real data, for accuracy): an MLP and a CNN."""

from __future__ import annotations

import torch
from torch import nn

__all__ = ["DigitsMLP", "DigitsCNN"]


class DigitsMLP(nn.Module):
    """``64 -> 64 (ReLU) -> 10`` on the flattened 8x8 digits; input float32 ``(B, 1, 8, 8)``, logits ``(B, 10)``."""

    def __init__(self) -> None:
        super().__init__()
        self.net = nn.Sequential(nn.Flatten(), nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 10))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)


class DigitsCNN(nn.Module):
    """Two 3x3 convolutions (16, 32 channels, ReLU, one 2x2 max-pool) and a linear layer, on ``(B, 1, 8, 8)``."""

    def __init__(self) -> None:
        super().__init__()
        self.net = nn.Sequential(nn.Conv2d(1, 16, 3, padding=1), nn.ReLU(), nn.Conv2d(16, 32, 3, padding=1),
                                 nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(), nn.Linear(32 * 16, 10))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)

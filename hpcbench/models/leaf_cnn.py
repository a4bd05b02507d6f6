"""LEAF's FEMNIST CNN (Caldas et al. 2018, "LEAF: A Benchmark for Federated Settings"; LEAF's ``models/femnist/cnn.py``)."""

from __future__ import annotations

import torch
from torch import nn

__all__ = ["LeafCNNNet"]


class LeafCNNNet(nn.Module):
    """Two 5 x 5 convolutions (32 and 64 channels, ``same`` padding, ReLU), each followed by 2 x 2
    max-pooling, a dense layer of ``hidden`` (LEAF: 2,048) units with ReLU, and the class layer.

    LEAF's model reads 28 x 28 grey images (then ``7 x 7 x 64`` features
    reach the dense layer: 6.6 M parameters for 62 classes, 6.5 M for 10);
    here any ``(C, H, W)`` input works, the dense layer's width following
    ``(H // 4) x (W // 4) x 64``.

    Parameters
    ----------
    input_shape : tuple of int
        ``(C, H, W)`` of one image.
    num_classes : int
    hidden : int, default 2048
        Units of the dense layer.

    Notes
    -----
    Input float32 of shape ``(B, C, H, W)``; output logits float32 of shape ``(B, num_classes)``.
    """

    def __init__(self, input_shape: tuple[int, int, int], num_classes: int, hidden: int = 2048) -> None:
        super().__init__()
        c, h, w = input_shape
        self.features = nn.Sequential(
            nn.Conv2d(c, 32, 5, padding=2), nn.ReLU(), nn.MaxPool2d(2, 2),
            nn.Conv2d(32, 64, 5, padding=2), nn.ReLU(), nn.MaxPool2d(2, 2))
        self.classifier = nn.Sequential(nn.Flatten(), nn.Linear((h // 4) * (w // 4) * 64, hidden), nn.ReLU(),
                                        nn.Linear(hidden, num_classes))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.classifier(self.features(x))

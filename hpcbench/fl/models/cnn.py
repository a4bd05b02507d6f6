"""LEAF's FEMNIST CNN (Caldas et al. 2018; ``models/femnist/cnn.py`` of LEAF), for any small image set."""

from __future__ import annotations

import torch
from torch import nn

from hpcbench.fl.contracts import FLModel
from hpcbench.fl.models.losses import Classifier
from hpcbench.runtime.errors import InputError

__all__ = ["LeafCNN"]


class LeafCNN(Classifier, nn.Module, FLModel):
    """Two 5 x 5 convolutions (32 and 64 channels, ``same`` padding, ReLU), each followed by 2 x 2
    max-pooling, a dense layer of ``model.hidden_dense`` (LEAF: 2,048) units with ReLU, and the class layer.

    LEAF's model reads 28 x 28 grey images (then ``7 x 7 x 64`` features
    reach the dense layer: 6.6 M parameters for 62 classes); here any
    ``(C, H, W)`` input works, the dense layer's width following
    ``(H // 4) x (W // 4) x 64``.

    Input float32 of shape (B, C, H, W); output logits of shape (B, num_classes).
    """

    input_kind = "images"

    def __init__(self, input_shape: tuple[int, int, int], num_classes: int, hidden: int = 2048) -> None:
        super().__init__()
        c, h, w = input_shape
        self.features = nn.Sequential(
            nn.Conv2d(c, 32, 5, padding=2), nn.ReLU(), nn.MaxPool2d(2, 2),
            nn.Conv2d(32, 64, 5, padding=2), nn.ReLU(), nn.MaxPool2d(2, 2))
        self.classifier = nn.Sequential(nn.Flatten(), nn.Linear((h // 4) * (w // 4) * 64, hidden), nn.ReLU(),
                                        nn.Linear(hidden, num_classes))

    @classmethod
    def build(cls, cfg, dataset) -> "LeafCNN":
        """For the dataset's ``input_shape`` and classes, ``model.hidden_dense`` dense units."""
        if len(dataset.input_shape) != 3:
            raise InputError(f"model.name 'cnn' reads (C, H, W) images; dataset {dataset.name!r} gives "
                             f"{dataset.input_shape}")
        return cls(dataset.input_shape, dataset.num_classes, cfg.hidden_dense)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.classifier(self.features(x))

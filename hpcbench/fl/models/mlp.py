"""Multi-layer perceptron (or logistic regression) for flat feature vectors."""

from __future__ import annotations

import torch
from torch import nn

from hpcbench.fl.contracts import FLModel
from hpcbench.fl.models.losses import Classifier

__all__ = ["MLP"]


class MLP(Classifier, nn.Module, FLModel):
    """``in_features -> hidden (ReLU) -> num_classes``; logistic regression when ``hidden == 0``.

    Input float32 of shape (B, in_features); output logits of shape (B, num_classes).
    """

    input_kind = "features"

    def __init__(self, in_features: int, hidden: int, num_classes: int) -> None:
        super().__init__()
        if hidden:
            self.net = nn.Sequential(nn.Linear(in_features, hidden), nn.ReLU(), nn.Linear(hidden, num_classes))
        else:
            self.net = nn.Linear(in_features, num_classes)

    @classmethod
    def build(cls, cfg, dataset) -> "MLP":
        """``model.hidden`` units between the dataset's features and classes."""
        return cls(dataset.num_features, cfg.hidden, dataset.num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)

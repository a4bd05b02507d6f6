"""The models the training runner trains, by name.

Image classifiers from torchvision, built with ``weights=None`` (random
initialisation, nothing downloaded), for KungFu's synthetic-ImageNet
benchmark (1000 classes, inputs ``[bs, 3, H, W]``), and two small models of
the bundled digits (real data, for accuracy): an MLP and a CNN.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import torch
from torch import nn

__all__ = ["ModelSpec", "MODELS", "build_model", "DigitsMLP", "DigitsCNN"]


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


def _torchvision(name: str) -> Callable[[], nn.Module]:
    def build() -> nn.Module:
        from hpcbench.train.tvimport import import_torchvision

        return getattr(import_torchvision().models, name)(weights=None)
    return build


@dataclass(frozen=True)
class ModelSpec:
    """A registered model.

    Attributes
    ----------
    build : callable
        ``build() -> nn.Module`` (random initialisation from torch's current seed).
    task : {"synthetic", "digits"}
        Its data: KungFu's random images with 1000 classes, or the digits.
    """

    build: Callable[[], nn.Module]
    task: str


#: model name -> spec
MODELS: dict[str, ModelSpec] = {
    "resnet18": ModelSpec(_torchvision("resnet18"), "synthetic"),
    "resnet50": ModelSpec(_torchvision("resnet50"), "synthetic"),
    "mobilenet_v2": ModelSpec(_torchvision("mobilenet_v2"), "synthetic"),
    "vgg16": ModelSpec(_torchvision("vgg16"), "synthetic"),
    "digits_mlp": ModelSpec(DigitsMLP, "digits"),
    "digits_cnn": ModelSpec(DigitsCNN, "digits"),
}


def build_model(name: str, seed: int) -> nn.Module:
    """Model ``name`` initialised from ``torch.manual_seed(seed)`` (the same on every rank).

    Raises
    ------
    KeyError
        Unknown name (configs validate names against :data:`MODELS` first).
    """
    spec = MODELS[name]
    torch.manual_seed(seed)
    return spec.build()

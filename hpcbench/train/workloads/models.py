"""The models the training runner trains, by name.

Image classifiers from torchvision, built with ``weights=None`` (random
initialisation, nothing downloaded), for KungFu's synthetic-ImageNet
benchmark (1000 classes, inputs ``[bs, 3, H, W]``), two small models of
the bundled digits (real data, for accuracy): an MLP and a CNN
(:mod:`hpcbench.train.workloads.digits_nets`), and the federated runner's character
LSTM on the bundled Shakespeare text (:mod:`hpcbench.train.workloads.char_nets`). Importing this registry does not import
torch (an emulated rank never needs it); building a model does.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable

from hpcbench.runtime.registry import Registry

if TYPE_CHECKING:   # the registry is read by config validation on every rank, torch or not
    from torch import nn

__all__ = ["ModelSpec", "MODELS", "build_model"]


def _digits(name: str) -> Callable[[], nn.Module]:
    def build() -> nn.Module:
        from hpcbench.train.workloads import digits_nets

        return getattr(digits_nets, name)()
    return build


def _char_lstm() -> nn.Module:
    from hpcbench.train.workloads.char_nets import NextCharLSTM

    return NextCharLSTM()


def _torchvision(name: str) -> Callable[[], nn.Module]:
    def build() -> nn.Module:
        from hpcbench.train.workloads.tvimport import import_torchvision

        return getattr(import_torchvision().models, name)(weights=None)
    return build


@dataclass(frozen=True)
class ModelSpec:
    """A registered model.

    Attributes
    ----------
    build : callable
        ``build() -> nn.Module`` (random initialisation from torch's current seed).
    task : {"synthetic", "digits", "shakespeare"}
        Its data: KungFu's random images with 1000 classes, the digits, or
        next-character windows of the Shakespeare text (:mod:`hpcbench.train.workloads.text`).
    train_samples : int or None
        Samples of its training set (one epoch), or None (random images: no
        training set, no epochs unless the job gives ``epoch_size``).
    """

    build: Callable[[], nn.Module]
    task: str
    train_samples: int | None = None


#: model name -> spec
MODELS: Registry[ModelSpec] = Registry("model", {
    "resnet18": ModelSpec(_torchvision("resnet18"), "synthetic"),
    "resnet50": ModelSpec(_torchvision("resnet50"), "synthetic"),
    "mobilenet_v2": ModelSpec(_torchvision("mobilenet_v2"), "synthetic"),
    "vgg16": ModelSpec(_torchvision("vgg16"), "synthetic"),
    "digits_mlp": ModelSpec(_digits("DigitsMLP"), "digits", 1347),     # 75 % of the 1,797 digits
    "digits_cnn": ModelSpec(_digits("DigitsCNN"), "digits", 1347),
    "shakespeare_lstm": ModelSpec(_char_lstm, "shakespeare", 12548),   # 90 % of the text in windows of 80
})


def build_model(name: str, seed: int) -> nn.Module:
    """Model ``name`` initialised from ``torch.manual_seed(seed)`` (the same on every rank).

    Raises
    ------
    hpcbench.runtime.registry.UnknownName
        Unknown name (configs validate names against :data:`MODELS` first).
    """
    import torch

    spec = MODELS[name]
    torch.manual_seed(seed)
    return spec.build()

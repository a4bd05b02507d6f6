"""The models the training runner trains, by name, and the data set each trains on by default.

Image classifiers from torchvision, built with ``weights=None`` (random
initialisation, nothing downloaded), for KungFu's synthetic-ImageNet
benchmark (1000 classes, inputs ``[bs, 3, H, W]``), two small models of
the bundled digits (real data, for accuracy): an MLP and a CNN
(:mod:`hpcbench.train.workloads.digits_nets`), the federated runner's character
LSTM on the bundled Shakespeare text (:mod:`hpcbench.train.workloads.char_nets`),
and LEAF's FEMNIST CNN (:mod:`hpcbench.models.leaf_cnn`) on Fashion-MNIST or any
image data set. ``model: package.module:callable`` names a user's factory
instead (docs/byo.md); it trains on the job's ``dataset``. Importing this
registry does not import torch (an emulated rank never needs it); building a
model does.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable

from hpcbench.datasets.callables import is_callable_name
from hpcbench.runtime.registry import Registry

if TYPE_CHECKING:   # the registry is read by config validation on every rank, torch or not
    from torch import nn

__all__ = ["ModelSpec", "MODELS", "build_model", "data_name", "train_samples"]


def _digits(name: str) -> Callable[..., nn.Module]:
    def build(input_shape, classes, options) -> nn.Module:
        from hpcbench.train.workloads import digits_nets

        return getattr(digits_nets, name)()
    return build


def _char_lstm(input_shape, classes, options) -> nn.Module:
    from hpcbench.train.workloads.char_nets import NextCharLSTM

    return NextCharLSTM()


def _leaf_cnn(input_shape, classes, options) -> nn.Module:
    from hpcbench.models.leaf_cnn import LeafCNNNet
    from hpcbench.runtime.errors import InputError

    if input_shape is None or len(input_shape) != 3:
        raise InputError(f"model: 'leaf_cnn' reads (C, H, W) images; the dataset gives {input_shape}")

    return LeafCNNNet(tuple(input_shape), classes, int(options.get("hidden_dense", 2048)))


def _torchvision(name: str) -> Callable[..., nn.Module]:
    def build(input_shape, classes, options) -> nn.Module:
        from hpcbench.train.workloads.tvimport import import_torchvision

        return getattr(import_torchvision().models, name)(weights=None)
    return build


@dataclass(frozen=True)
class ModelSpec:
    """A registered model.

    Attributes
    ----------
    build : callable
        ``build(input_shape, classes, options) -> nn.Module`` (random initialisation from torch's current
        seed): ``input_shape`` one sample's shape, ``classes`` the data's classes, ``options`` the job's
        ``model_options``.
    task : {"synthetic", "digits", "shakespeare", "fashion_mnist"}
        Its data by default: KungFu's random images with 1000 classes, the digits, next-character windows
        of the Shakespeare text (:mod:`hpcbench.train.workloads.text`), or Fashion-MNIST.
    train_samples : int or None
        Samples of that training set (one epoch), or None (random images: no
        training set, no epochs unless the job gives ``epoch_size``).
    any_images : bool
        Whether it also trains on any other image data set (``dataset``: ``(C, H, W)`` images).
    options : tuple of str
        The ``model_options`` keys it reads.
    """

    build: Callable[..., nn.Module]
    task: str
    train_samples: int | None = None
    any_images: bool = False
    options: tuple[str, ...] = ()


#: model name -> spec
MODELS: Registry[ModelSpec] = Registry("model", {
    "resnet18": ModelSpec(_torchvision("resnet18"), "synthetic"),
    "resnet50": ModelSpec(_torchvision("resnet50"), "synthetic"),
    "mobilenet_v2": ModelSpec(_torchvision("mobilenet_v2"), "synthetic"),
    "vgg16": ModelSpec(_torchvision("vgg16"), "synthetic"),
    "digits_mlp": ModelSpec(_digits("DigitsMLP"), "digits", 1347),     # 75 % of the 1,797 digits
    "digits_cnn": ModelSpec(_digits("DigitsCNN"), "digits", 1347),
    "shakespeare_lstm": ModelSpec(_char_lstm, "shakespeare", 12548),   # 90 % of the text in windows of 80
    "leaf_cnn": ModelSpec(_leaf_cnn, "fashion_mnist", 60000, any_images=True, options=("hidden_dense",)),
})


def data_name(model: str, dataset: str | None) -> str:
    """The data a job trains on: its ``dataset.name``, else the registered model's task."""
    return dataset if dataset is not None else MODELS[model].task


def train_samples(model: str, dataset: str | None) -> int | None:
    """Samples of one epoch known before the data are read (None: random images, or read with the data)."""
    if is_callable_name(model) or (dataset is not None and dataset != MODELS[model].task):
        return None
    return MODELS[model].train_samples


def build_model(name: str, seed: int, data=None, options: dict | None = None) -> nn.Module:
    """Model ``name`` initialised from ``torch.manual_seed(seed)`` (the same on every rank).

    Parameters
    ----------
    name : str
        A registered name, or ``package.module:callable`` (docs/byo.md: called as
        ``factory({"name": name, "options": options}, seed, data.classes)`` and checked on two samples).
    seed : int
    data : object, optional
        The job's data (:mod:`hpcbench.train.workloads.data`): its ``input_shape``, ``classes`` and
        ``sample_inputs``; needed by ``leaf_cnn`` and callables.
    options : dict, optional
        The job's ``model_options``.

    Raises
    ------
    hpcbench.runtime.registry.UnknownName
        Unknown name (configs validate names against :data:`MODELS` first).
    hpcbench.runtime.errors.InputError
        A callable that breaks the contract (:func:`hpcbench.models.user.build_user_model`).
    """
    import torch

    options = dict(options or {})
    torch.manual_seed(seed)
    if is_callable_name(name):
        from hpcbench.models.user import build_user_model

        return build_user_model(name, "model", {"name": name, "options": options}, seed, data.classes,
                                data.sample_inputs(2))
    shape = getattr(data, "input_shape", None)
    classes = getattr(data, "classes", None)
    return MODELS[name].build(shape, classes, options)

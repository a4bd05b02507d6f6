"""Models of the federated emulation; a registry maps ``model.name`` to a builder.

Torch-free at import: a registry line names its model class by import path
and declares its ``input_kind`` (``tests/test_fl_numpy.py`` checks it against
the class), so validating a config and running the numpy engine
(``client_training: numpy``) never import torch; the torch model class is
imported when a torch engine builds it.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import TYPE_CHECKING

from hpcbench.fl.contracts import FLModel
from hpcbench.runtime.registry import Registry

if TYPE_CHECKING:  # torch is imported only where a torch engine needs it
    import torch

__all__ = ["ModelEntry", "MODELS", "model_entry", "check_model_name", "build_model", "build_numpy_model",
           "flat_parameters", "load_flat_parameters"]


@dataclass(frozen=True)
class ModelEntry:
    """One registered model.

    Attributes
    ----------
    target : str
        ``module:Class`` of its :class:`hpcbench.fl.contracts.FLModel` (a ``torch.nn.Module``).
    input_kind : str
        The class's ``input_kind`` (``features`` or ``tokens``).
    numpy_target : str or None
        ``module:Class`` of its numpy twin for ``client_training: numpy``
        (same flat parameter layout), or None when only the torch engines train it.
    functional : bool
        Its training step is a function of its parameters alone (no buffer
        such as BatchNorm's running statistics changes): what the ``batched``
        engine needs (:class:`hpcbench.fl.engines.batched.BatchedEngine`).
    """

    target: str
    input_kind: str | None
    numpy_target: str | None = None
    functional: bool = True

    def load(self) -> type[FLModel]:
        """The torch model class (imports torch)."""
        return _load(self.target)

    def load_numpy(self) -> type:
        """The numpy model class.

        Raises
        ------
        ValueError
            The model has no numpy twin.
        """
        if self.numpy_target is None:
            raise ValueError(f"model {self.target} has no numpy implementation")
        return _load(self.numpy_target)


def _load(target: str):
    module, name = target.split(":")
    return getattr(importlib.import_module(module), name)


#: model name -> :class:`ModelEntry` (the class is built with ``build(ModelConfig, dataset)``)
MODELS: Registry[ModelEntry] = Registry("model", {
    "mlp": ModelEntry("hpcbench.fl.models.mlp:MLP", "features", "hpcbench.fl.models.numpy_mlp:NumpyMLP"),
    "logreg": ModelEntry("hpcbench.fl.models.logreg:LogReg", "features", "hpcbench.fl.models.numpy_mlp:NumpyMLP"),
    "charlstm": ModelEntry("hpcbench.fl.models.charlstm:CharLSTM", "tokens"),
    "cnn": ModelEntry("hpcbench.fl.models.cnn:LeafCNN", "images"),
    "mobilenet_v2": ModelEntry("hpcbench.fl.models.mobilenet:MobileNetV2", "images", functional=False),
})

#: the entry of every ``model.name: package.module:callable`` (its input kind is checked by a forward pass)
CALLABLE_MODEL = ModelEntry("hpcbench.fl.models.callable:CallableModel", None)


def model_entry(name: str) -> ModelEntry:
    """The entry of ``model.name``: a registered model, or :data:`CALLABLE_MODEL` for ``module:callable``."""
    from hpcbench.datasets.callables import is_callable_name

    return CALLABLE_MODEL if is_callable_name(name) else MODELS[name]


def check_model_name(name: str) -> str:
    """Config validator of ``model.name``: a registered name, or a ``package.module:callable`` that resolves.

    Raises
    ------
    hpcbench.runtime.errors.InputError
        Unknown name, or a callable that cannot be imported or is not callable.
    """
    from hpcbench.datasets.callables import registered_or_callable

    return registered_or_callable(name, MODELS, "model.name")


def build_model(cfg, dataset, seed: int) -> FLModel:
    """Build model ``cfg.name`` for ``dataset`` with parameters initialised from ``seed`` (torch).

    Raises
    ------
    hpcbench.runtime.errors.InputError
        The model does not fit the dataset, a library it needs is missing, or
        a user's factory broke its contract (:class:`hpcbench.fl.models.callable.CallableModel`).
    """
    import torch

    entry = model_entry(cfg.name)
    cls = entry.load()
    torch.manual_seed(seed)
    if entry is CALLABLE_MODEL:
        return cls.build(cfg, dataset, seed)
    return cls.build(cfg, dataset)


def build_numpy_model(cfg, dataset, seed: int):
    """The numpy twin of model ``cfg.name`` for ``dataset``, initial parameters drawn from ``seed``.

    Raises
    ------
    ValueError
        The model has no numpy twin (see :attr:`ModelEntry.numpy_target`).
    """
    return model_entry(cfg.name).load_numpy().build(cfg, dataset, seed)


def flat_parameters(model) -> torch.Tensor:
    """All parameters of a torch model as one float32 vector of shape (num_parameters,), a copy in host memory."""
    import torch

    return torch.nn.utils.parameters_to_vector(model.parameters()).detach().cpu().clone()


def load_flat_parameters(model, flat, params: list | None = None) -> None:
    """Copy a flat float32 vector into the model's parameters (never aliasing ``flat``).

    ``params``: ``list(model.parameters())`` when the caller already has it
    (saves walking the module tree once per client).
    """
    import torch

    with torch.no_grad():
        pos = 0
        for p in model.parameters() if params is None else params:
            n = p.numel()
            p.copy_(flat[pos:pos + n].view_as(p))
            pos += n
        if pos != flat.numel():
            raise ValueError(f"flat vector has {flat.numel()} elements, model has {pos}")

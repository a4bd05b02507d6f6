"""A user's model: ``model.name: package.module:callable`` (the contract is in docs/byo.md)."""

from __future__ import annotations

import torch
from torch import nn

from hpcbench.fl.contracts import FLModel
from hpcbench.fl.models.losses import Classifier
from hpcbench.runtime.errors import InputError

__all__ = ["CallableModel"]


class CallableModel(Classifier, nn.Module, FLModel):
    """The ``torch.nn.Module`` a user's factory returns, trained with cross-entropy.

    The factory is called as ``factory(config, seed, num_classes)``:
    ``config`` the ``model`` section as a dict (its ``options`` mapping for
    the factory's own keys), ``seed`` the job's seed (torch's generator is
    seeded with it just before), ``num_classes`` the dataset's. The module
    maps float32 inputs of the dataset's shape ``(B, *input_shape)`` to
    logits ``(B, num_classes)``; :meth:`build` checks that on two test
    samples. Datasets of feature vectors or images only (the loss is one
    cross-entropy per sample).
    """

    input_kind = None   # any dataset of features or images; checked by a forward pass

    def __init__(self, inner: nn.Module) -> None:
        super().__init__()
        self.inner = inner

    @classmethod
    def build(cls, cfg, dataset, seed: int = 0) -> "CallableModel":
        """Call the factory and check its module (see the class docstring).

        Raises
        ------
        InputError
            Naming ``model.name``, the callable and what was wrong: the factory
            raised, returned no module or one without parameters, or its
            output on two test samples is not ``(2, num_classes)`` floats.
        """
        from hpcbench.datasets.callables import resolve_callable

        where = f"model.name: {cfg.name!r}"
        if dataset.input_kind not in ("features", "images"):
            raise InputError(f"{where}: a callable model trains on feature or image datasets; dataset "
                             f"{dataset.name!r} gives {dataset.input_kind}")
        factory = resolve_callable(cfg.name, "model.name")
        try:
            inner = factory(cfg.model_dump(), seed, dataset.num_classes)
        except Exception as exc:
            raise InputError(f"{where} raised {type(exc).__name__}: {exc}") from None
        if not isinstance(inner, nn.Module):
            raise InputError(f"{where} returned a {type(inner).__name__}; expected a torch.nn.Module")
        if not any(p.requires_grad for p in inner.parameters()):
            raise InputError(f"{where} returned a module without trainable parameters")
        x = dataset.test_set()[0][:2]
        try:
            with torch.no_grad():
                out = inner(x)
        except Exception as exc:
            raise InputError(f"{where}: the module's forward pass on inputs of shape {tuple(x.shape)} float32 "
                             f"raised {type(exc).__name__}: {exc}") from None
        want = (len(x), dataset.num_classes)
        if not isinstance(out, torch.Tensor) or tuple(out.shape) != want or not out.is_floating_point():
            got = f"{tuple(out.shape)} {out.dtype}" if isinstance(out, torch.Tensor) else type(out).__name__
            raise InputError(f"{where}: the module maps inputs of shape {tuple(x.shape)} to {got}; expected float "
                             f"logits of shape {want}")
        return cls(inner)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.inner(x)

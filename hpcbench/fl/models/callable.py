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
        from hpcbench.models.user import build_user_model

        if dataset.input_kind not in ("features", "images"):
            raise InputError(f"model.name: {cfg.name!r}: a callable model trains on feature or image datasets; "
                             f"dataset {dataset.name!r} gives {dataset.input_kind}")
        inner = build_user_model(cfg.name, "model.name", cfg.model_dump(), seed, dataset.num_classes,
                                 dataset.test_set()[0][:2])
        return cls(inner)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.inner(x)

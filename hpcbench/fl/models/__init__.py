"""Models of the federated emulation; a registry maps ``model.name`` to a builder."""

from __future__ import annotations

from typing import Callable

import torch

from hpcbench.fl.models.charlstm import CharLSTM
from hpcbench.fl.models.mlp import MLP

__all__ = ["MODELS", "build_model", "flat_parameters", "load_flat_parameters"]

#: model name -> builder ``(ModelConfig, dataset) -> torch.nn.Module``
MODELS: dict[str, Callable] = {
    "mlp": lambda cfg, ds: MLP(ds.num_features, cfg.hidden, ds.num_classes),
    "logreg": lambda cfg, ds: MLP(ds.num_features, 0, ds.num_classes),
    "charlstm": lambda cfg, ds: CharLSTM(ds.num_classes, cfg.embedding, cfg.hidden, cfg.layers),
}


def build_model(cfg, dataset, seed: int) -> torch.nn.Module:
    """Build model ``cfg.name`` for ``dataset`` with parameters initialised from ``seed``."""
    torch.manual_seed(seed)
    return MODELS[cfg.name](cfg, dataset)


def flat_parameters(model: torch.nn.Module) -> torch.Tensor:
    """All parameters as one float32 vector of shape (num_parameters,), a copy."""
    return torch.nn.utils.parameters_to_vector(model.parameters()).detach().clone()


def load_flat_parameters(model: torch.nn.Module, flat: torch.Tensor) -> None:
    """Copy a flat float32 vector into the model's parameters (never aliasing ``flat``)."""
    with torch.no_grad():
        pos = 0
        for p in model.parameters():
            n = p.numel()
            p.copy_(flat[pos:pos + n].view_as(p))
            pos += n
        if pos != flat.numel():
            raise ValueError(f"flat vector has {flat.numel()} elements, model has {pos}")

"""Models of the federated emulation; a registry maps ``model.name`` to a builder."""

from __future__ import annotations

import torch

from hpcbench.fl.contracts import FLModel
from hpcbench.fl.models.charlstm import CharLSTM
from hpcbench.fl.models.logreg import LogReg
from hpcbench.fl.models.mlp import MLP

__all__ = ["MODELS", "build_model", "flat_parameters", "load_flat_parameters"]

#: model name -> :class:`hpcbench.fl.contracts.FLModel` class (``build(ModelConfig, dataset)``)
MODELS: dict[str, type[FLModel]] = {
    "mlp": MLP,
    "logreg": LogReg,
    "charlstm": CharLSTM,
}


def build_model(cfg, dataset, seed: int) -> FLModel:
    """Build model ``cfg.name`` for ``dataset`` with parameters initialised from ``seed``."""
    torch.manual_seed(seed)
    return MODELS[cfg.name].build(cfg, dataset)


def flat_parameters(model: torch.nn.Module) -> torch.Tensor:
    """All parameters as one float32 vector of shape (num_parameters,), a copy."""
    return torch.nn.utils.parameters_to_vector(model.parameters()).detach().clone()


def load_flat_parameters(model: torch.nn.Module, flat: torch.Tensor, params: list | None = None) -> None:
    """Copy a flat float32 vector into the model's parameters (never aliasing ``flat``).

    ``params``: ``list(model.parameters())`` when the caller already has it
    (saves walking the module tree once per client).
    """
    with torch.no_grad():
        pos = 0
        for p in model.parameters() if params is None else params:
            n = p.numel()
            p.copy_(flat[pos:pos + n].view_as(p))
            pos += n
        if pos != flat.numel():
            raise ValueError(f"flat vector has {flat.numel()} elements, model has {pos}")

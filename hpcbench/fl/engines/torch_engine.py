"""What the torch engines share: the server's side (initial parameters, test set, evaluation) in torch."""

from __future__ import annotations

import numpy as np

from hpcbench.fl.engines.base import ClientEngine

__all__ = ["TorchEngine"]


class TorchEngine(ClientEngine):
    """A client engine whose models are ``torch.nn.Module``\\ s (a rank running it imports torch)."""

    needs_torch = True

    @staticmethod
    def initial_parameters(model) -> np.ndarray:
        from hpcbench.fl.models import flat_parameters

        return flat_parameters(model).numpy().copy()

    @staticmethod
    def test_set(dataset):
        return dataset.test_set()

    @staticmethod
    def evaluate(model, params: np.ndarray, x, y) -> tuple[float, float]:
        import torch

        from hpcbench.fl.engines.training import evaluate

        return evaluate(model, torch.from_numpy(params), x, y)

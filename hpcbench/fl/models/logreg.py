"""Multinomial logistic regression on flat feature vectors."""

from __future__ import annotations

from hpcbench.fl.models.mlp import MLP

__all__ = ["LogReg"]


class LogReg(MLP):
    """One linear layer from features to class logits (an :class:`MLP` without hidden layer)."""

    @classmethod
    def build(cls, cfg, dataset) -> "LogReg":
        """Ignores ``model.hidden``."""
        return cls(dataset.num_features, 0, dataset.num_classes)

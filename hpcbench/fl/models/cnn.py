"""LEAF's FEMNIST CNN (Caldas et al. 2018; ``models/femnist/cnn.py`` of LEAF), for any small image set.

The network is core's :class:`hpcbench.models.leaf_cnn.LeafCNNNet` (the training runner's ``leaf_cnn`` too);
this adds the FL model's loss and ``build``."""

from __future__ import annotations

from hpcbench.fl.contracts import FLModel
from hpcbench.fl.models.losses import Classifier
from hpcbench.models.leaf_cnn import LeafCNNNet
from hpcbench.runtime.errors import InputError

__all__ = ["LeafCNN"]


class LeafCNN(Classifier, LeafCNNNet, FLModel):
    """:class:`~hpcbench.models.leaf_cnn.LeafCNNNet` (two 5 x 5 convolutions of 32 and 64 channels, 2 x 2
    max-pooling after each, a dense layer of ``model.hidden_dense`` units) as an FL model.

    Input float32 of shape (B, C, H, W); output logits of shape (B, num_classes).
    """

    input_kind = "images"

    @classmethod
    def build(cls, cfg, dataset) -> "LeafCNN":
        """For the dataset's ``input_shape`` and classes, ``model.hidden_dense`` dense units."""
        if len(dataset.input_shape) != 3:
            raise InputError(f"model.name 'cnn' reads (C, H, W) images; dataset {dataset.name!r} gives "
                             f"{dataset.input_shape}")
        return cls(dataset.input_shape, dataset.num_classes, cfg.hidden_dense)

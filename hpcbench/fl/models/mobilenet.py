"""torchvision's MobileNetV2 (Sandler et al. 2018), the mobile network of Oort's OpenImage runs, for images."""

from __future__ import annotations

import torch
from torch import nn

from hpcbench.fl.contracts import FLModel
from hpcbench.fl.models.losses import Classifier
from hpcbench.runtime.errors import InputError

__all__ = ["MobileNetV2"]


class MobileNetV2(Classifier, nn.Module, FLModel):
    """``torchvision.models.mobilenet_v2(width_mult=model.width, num_classes=...)``, random weights.

    ``model.input_size`` (null: the dataset's) resizes inputs bilinearly
    before the network (MobileNetV2 is built for 224 x 224; 28 x 28 images
    shrink to one pixel before its last stage); grey images are repeated to
    three channels. Its BatchNorm layers keep running statistics, so the
    ``batched`` engine (which trains parameters only) does not train it.

    Input float32 of shape (B, C, H, W); output logits of shape (B, num_classes).
    """

    input_kind = "images"

    def __init__(self, num_classes: int, width: float, input_size: int | None) -> None:
        super().__init__()
        from hpcbench.train.tvimport import import_torchvision

        try:
            tv = import_torchvision()
        except ImportError as exc:
            raise InputError(f"model.name 'mobilenet_v2' needs torchvision, which cannot be imported ({exc}); "
                             f"pip install 'hpcbench' brings torchvision==0.28.0 (the version for torch 2.13.0)") \
                from None
        self.net = tv.models.mobilenet_v2(weights=None, width_mult=width, num_classes=num_classes)
        self.input_size = input_size

    @classmethod
    def build(cls, cfg, dataset) -> "MobileNetV2":
        """``model.width`` and ``model.input_size`` over the dataset's classes."""
        if len(dataset.input_shape) != 3 or dataset.input_shape[0] not in (1, 3):
            raise InputError(f"model.name 'mobilenet_v2' reads (1 or 3, H, W) images; dataset {dataset.name!r} gives "
                             f"{dataset.input_shape}")
        return cls(dataset.num_classes, cfg.width, cfg.input_size)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.shape[1] == 1:
            x = x.expand(-1, 3, -1, -1)
        if self.input_size is not None and x.shape[-1] != self.input_size:
            x = nn.functional.interpolate(x, size=(self.input_size, self.input_size), mode="bilinear",
                                          align_corners=False)
        return self.net(x)

"""The character LSTM of the Shakespeare task (:mod:`hpcbench.train.workloads.text`), for data-parallel training."""

from __future__ import annotations

import torch

from hpcbench.fl.models.charlstm import CharLSTM
from hpcbench.train.workloads.text import ShakespeareTask

__all__ = ["NextCharLSTM"]


class NextCharLSTM(CharLSTM):
    """The federated runner's character LSTM (embedding 8, one LSTM layer, linear head over the 65 characters),
    with logits in the layout of ``cross_entropy`` for sequences: input int64 ``(B, T)``, logits float32
    ``(B, 65, T)``, so that the training runner's loss and accuracy code serves it as it serves the digits.

    Parameters
    ----------
    hidden : int, default 128
        LSTM units (the FL default is 64 for hundreds of emulated clients; LEAF uses two layers of 256).
    """

    def __init__(self, hidden: int = 128) -> None:
        super().__init__(ShakespeareTask.classes, 8, hidden, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return super().forward(x).transpose(1, 2)

"""Rank 0's evaluation of the global model, and the time-to-accuracy it notes."""

from __future__ import annotations

import math
import time

import numpy as np

from hpcbench.fl.rounds.summary import Summary
from hpcbench.fl.settings import RoundSettings

__all__ = ["Evaluator"]


class Evaluator:
    """Tests the global model every ``eval_interval`` steps and at the last; notes the target's first reach.

    Parameters
    ----------
    settings : hpcbench.fl.settings.RoundSettings
    engine : type of hpcbench.fl.engines.ClientEngine
        The server engine (:func:`hpcbench.fl.engines.server_engine`): its
        model kind's initial parameters, test set and evaluation.
    model : torch.nn.Module or hpcbench.fl.models.numpy_mlp.NumpyMLP
        The server model (:attr:`hpcbench.fl.setup.Setup.server_model`).
    dataset : hpcbench.fl.contracts.FederatedDataset
        Its test set is read at construction.
    """

    def __init__(self, settings: RoundSettings, engine, model, dataset) -> None:
        self.settings = settings
        self.engine = engine
        self.model = model
        self.test_set = engine.test_set(dataset)

    def initial_parameters(self) -> np.ndarray:
        """The initial global model as a new flat float32 array of shape (P,)."""
        return self.engine.initial_parameters(self.model)

    def evaluate(self, step: int, params: np.ndarray, vtime_s: float, summary: Summary, results,
                 t0: float) -> tuple[float, float, bool]:
        """Test ``params`` after ``step`` when it is due; note the target in ``summary`` and ``results``.

        Returns ``(accuracy, loss, stop)``: NaN, NaN when not evaluated, and
        ``stop`` True when the target was just reached under ``stop_at_target``.
        """
        s = self.settings
        if step % s.eval_interval and step != s.rounds:
            return math.nan, math.nan, False
        acc, loss = self.engine.evaluate(self.model, params, *self.test_set)
        summary.final_accuracy = acc
        if acc < s.target_accuracy or summary.rounds_to_accuracy >= 0:
            return acc, loss, False
        summary.rounds_to_accuracy = step
        summary.time_to_accuracy_s = vtime_s
        if results:
            results.set_attrs(time_to_accuracy_s=vtime_s, rounds_to_accuracy=step,
                              wall_to_accuracy_s=time.perf_counter() - t0)
        return acc, loss, s.stop_at_target

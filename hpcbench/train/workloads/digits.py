"""The bundled 8x8 digits (scikit-learn's copy of the UCI set) as a data-parallel training task."""

from __future__ import annotations

import numpy as np

from hpcbench.datasets.digits import read_digits
from hpcbench.train.workloads.split import SplitTask

__all__ = ["DigitsTask"]


class DigitsTask(SplitTask):
    """scikit-learn's handwritten digits (1,797 real 8x8 images, 10 classes) for data-parallel SGD.

    A seeded stratified 25 % is held out for accuracy (1,347 training
    images), the rest streamed as :class:`~hpcbench.train.workloads.split.SplitTask` streams it. Inputs float32
    ``(B, 1, 8, 8)`` in [0, 1], labels int64.

    Parameters
    ----------
    seed : int
    rank, world_size : int
        This worker and the number of workers.
    arrays : tuple of ndarray, optional
        ``(x_train, y_train, x_test, y_test)`` when loaded already (rank 0
        loads and broadcasts).
    device : str
        torch device the data live on (1.3 MB: all of it is copied there once).
    """

    classes = 10

    @staticmethod
    def load(seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """``(x_train, y_train, x_test, y_test)``: the digits scaled to [0, 1], a stratified seeded split.

        Read by :func:`hpcbench.datasets.digits.read_digits` (the FL runner's
        reader too); every class keeps 25 % of its images (rounded) for the
        test set.
        """
        x, y = read_digits()
        x = x.reshape(-1, 1, 8, 8)
        rng = np.random.default_rng(seed)
        test = np.zeros(len(y), dtype=bool)
        for c in range(10):
            members = rng.permutation(np.flatnonzero(y == c))
            test[members[:round(0.25 * len(members))]] = True
        return x[~test], y[~test], x[test], y[test]

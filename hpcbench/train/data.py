"""Training data: KungFu's synthetic ImageNet batch, and the bundled digits split across workers."""

from __future__ import annotations

import numpy as np
import torch

__all__ = ["SyntheticImages", "DigitsTask", "build_data"]


class SyntheticImages:
    """KungFu's synthetic benchmark input (``benchmarks/system/benchmark_kungfu.py``).

    One random batch, drawn once and reused at every step, as KungFu does:
    inputs ``torch.randn(batch, 3, size, size)`` (float32) and labels uniform
    in ``0..999`` (int64), seeded per rank.

    Parameters
    ----------
    batch : int
        Per-worker batch size.
    image_size : int
        Height and width (224 in KungFu; 32 or 64 for quick CPU runs).
    seed : int
    rank : int
    """

    classes = 1000

    def __init__(self, batch: int, image_size: int, seed: int, rank: int) -> None:
        g = torch.Generator().manual_seed(seed * 100003 + rank)
        self.x = torch.randn(batch, 3, image_size, image_size, generator=g)
        self.y = torch.randint(0, self.classes, (batch,), generator=g)

    def batch(self, step: int) -> tuple[torch.Tensor, torch.Tensor]:
        """Inputs and labels of ``step`` (the same batch every step)."""
        return self.x, self.y

    def accuracy(self, model) -> float:
        """NaN: random labels have no accuracy to measure."""
        return float("nan")


class DigitsTask:
    """scikit-learn's handwritten digits (1,797 real 8x8 images, 10 classes) for data-parallel SGD.

    A seeded stratified 25 % is held out for accuracy (1,347 training images). Step ``t`` draws a
    global batch of ``batch * world`` training samples (a seeded permutation
    per epoch, the same on every rank) and worker ``r`` takes its ``r``-th
    slice, so the union of the workers' batches is what one process training
    on the global batch would see. Inputs float32 ``(B, 1, 8, 8)`` in [0, 1],
    labels int64.

    Parameters
    ----------
    batch : int
        Per-worker batch.
    seed : int
    rank, world : int
        This worker and the number of workers.
    arrays : tuple of ndarray, optional
        ``(x_train, y_train, x_test, y_test)`` when loaded already (rank 0
        loads and broadcasts).
    """

    classes = 10

    def __init__(self, batch: int, seed: int, rank: int, world: int, arrays=None) -> None:
        self.x_train, self.y_train, self.x_test, self.y_test = (
            map(torch.from_numpy, arrays if arrays is not None else self.load(seed)))
        self.batch_size, self.seed, self.rank, self.world = batch, seed, rank, world
        self.global_batch = batch * world
        if self.global_batch > len(self.y_train):
            raise ValueError(f"batch_size x workers = {self.global_batch} exceeds the {len(self.y_train)} "
                             f"training digits")

    @staticmethod
    def load(seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """``(x_train, y_train, x_test, y_test)``: the digits scaled to [0, 1], a stratified seeded split.

        Reads scikit-learn's bundled ``datasets/data/digits.csv.gz`` (64
        pixel values and the label per row, what ``load_digits`` reads)
        without importing scikit-learn, whose import takes seconds; every
        class keeps 25 % of its images (rounded) for the test set.
        """
        import gzip
        import importlib.util
        from pathlib import Path

        spec = importlib.util.find_spec("sklearn")
        if spec is None or not spec.submodule_search_locations:
            raise ImportError("the digits come with scikit-learn, which is not installed")
        path = Path(list(spec.submodule_search_locations)[0]) / "datasets" / "data" / "digits.csv.gz"
        with gzip.open(path, "rt") as f:
            raw = np.loadtxt(f, delimiter=",", dtype=np.float64)
        x = (raw[:, :64] / 16.0).astype(np.float32).reshape(-1, 1, 8, 8)
        y = raw[:, 64].astype(np.int64)
        rng = np.random.default_rng(seed)
        test = np.zeros(len(y), dtype=bool)
        for c in range(10):
            members = rng.permutation(np.flatnonzero(y == c))
            test[members[:round(0.25 * len(members))]] = True
        return x[~test], y[~test], x[test], y[test]

    def global_indices(self, step: int) -> np.ndarray:
        """Indices of step ``step``'s global batch (all workers' samples, in rank order)."""
        per_epoch = len(self.y_train) // self.global_batch
        epoch, k = divmod(step, per_epoch)
        perm = np.random.default_rng([self.seed, epoch]).permutation(len(self.y_train))
        return perm[k * self.global_batch:(k + 1) * self.global_batch]

    def batch(self, step: int) -> tuple[torch.Tensor, torch.Tensor]:
        """This worker's slice of step ``step``'s global batch."""
        idx = self.global_indices(step)[self.rank * self.batch_size:(self.rank + 1) * self.batch_size]
        t = torch.from_numpy(idx)
        return self.x_train[t], self.y_train[t]

    @torch.no_grad()
    def accuracy(self, model) -> float:
        """Top-1 accuracy of ``model`` on the held-out digits."""
        model.eval()
        pred = model(self.x_test).argmax(1)
        model.train()
        return float((pred == self.y_test).double().mean())


def build_data(task: str, batch: int, image_size: int, seed: int, comm):
    """The data of ``task`` (``"synthetic"`` or ``"digits"``) for this rank; collective over ``comm``."""
    if task == "synthetic":
        return SyntheticImages(batch, image_size, seed, comm.rank)
    from hpcbench.runtime.wait import sleep_bcast

    arrays = sleep_bcast(comm, DigitsTask.load(seed) if comm.rank == 0 else None)
    return DigitsTask(batch, seed, comm.rank, comm.size, arrays)

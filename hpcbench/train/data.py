"""Training data: KungFu's synthetic ImageNet batch, and the bundled digits split across workers.

Both serve :meth:`take`: the batch of one worker at a position of the
training stream, for the batch sizes of the step (one per worker, from
:class:`hpcbench.train.context.BatchState`, the one place that holds them).
The stream is a sequence of epochs, each a permutation of the training set
(KungFu's ``PolicyHook`` counts epochs as ``trained_samples // epoch_size``):
a step takes the next ``sum(sizes)`` samples, worker ``r`` the slice after
the first ``sum(sizes[:r])``, so a batch size that changes at run time never
skips or repeats a sample within an epoch.
"""

from __future__ import annotations

import numpy as np
import torch

__all__ = ["SyntheticImages", "DigitsTask", "build_data"]


class SyntheticImages:
    """KungFu's synthetic benchmark input (``benchmarks/system/benchmark_kungfu.py``).

    One random batch, drawn once and reused at every step, as KungFu does:
    inputs ``torch.randn(batch, 3, size, size)`` (float32) and labels uniform
    in ``0..999`` (int64), seeded per rank. A batch size that changes at run
    time draws one batch of the new size (seeded by size too) and reuses it.

    Parameters
    ----------
    batch : int
        Per-worker batch size at the start.
    image_size : int
        Height and width (224 in KungFu; 32 or 64 for quick CPU runs).
    seed : int
    rank : int
    device : str
        torch device the batches live on (KungFu's benchmark keeps its one
        batch on the GPU: no host-to-device copy per step).
    """

    classes = 1000
    #: samples per epoch: random images have no training set (an epoch is the config's ``epoch_size``)
    num_samples = None

    def __init__(self, batch: int, image_size: int, seed: int, rank: int, device: str = "cpu") -> None:
        self.image_size, self.seed, self.rank, self.device = image_size, seed, rank, device
        self._batches = {batch: self._draw(batch, torch.Generator().manual_seed(seed * 100003 + rank))}

    def _draw(self, b: int, g) -> tuple[torch.Tensor, torch.Tensor]:
        x = torch.randn(b, 3, self.image_size, self.image_size, generator=g)
        y = torch.randint(0, self.classes, (b,), generator=g)
        return x.to(self.device), y.to(self.device)

    def take(self, position: int, sizes) -> tuple[torch.Tensor, torch.Tensor]:
        """Inputs and labels of this worker's ``sizes[rank]`` samples (the same batch whatever ``position``)."""
        b = int(sizes[self.rank])
        if b not in self._batches:
            self._batches[b] = self._draw(b, torch.Generator().manual_seed((self.seed * 100003 + self.rank) * 1009 + b))
        return self._batches[b]

    def accuracy(self, model) -> float:
        """NaN: random labels have no accuracy to measure."""
        return float("nan")


class DigitsTask:
    """scikit-learn's handwritten digits (1,797 real 8x8 images, 10 classes) for data-parallel SGD.

    A seeded stratified 25 % is held out for accuracy (1,347 training
    images). The training stream is one seeded permutation per epoch
    (``default_rng([seed, epoch])``, the same on every rank), concatenated:
    a step takes the next ``sum(sizes)`` samples of the stream (a step may
    span two epochs, as KungFu's input pipelines that repeat the dataset) and
    worker ``r`` takes its slice, so the union of the workers' batches is what
    one process training on the global batch would see, and every sample is
    seen exactly once per epoch whatever the batch sizes. Inputs float32
    ``(B, 1, 8, 8)`` in [0, 1], labels int64.

    Parameters
    ----------
    seed : int
    rank, world : int
        This worker and the number of workers.
    arrays : tuple of ndarray, optional
        ``(x_train, y_train, x_test, y_test)`` when loaded already (rank 0
        loads and broadcasts).
    device : str
        torch device the data live on (1.3 MB: all of it is copied there once).
    """

    classes = 10

    def __init__(self, seed: int, rank: int, world: int, arrays=None, device: str = "cpu") -> None:
        self.x_train, self.y_train, self.x_test, self.y_test = (
            torch.from_numpy(a).to(device) for a in (arrays if arrays is not None else self.load(seed)))
        self.seed, self.rank, self.world = seed, rank, world
        self._perms: dict[int, np.ndarray] = {}

    @property
    def num_samples(self) -> int:
        """Training samples (one epoch)."""
        return len(self.y_train)

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

    def _perm(self, epoch: int) -> np.ndarray:
        if epoch not in self._perms:
            if len(self._perms) > 2:
                self._perms.pop(min(self._perms))
            self._perms[epoch] = np.random.default_rng([self.seed, epoch]).permutation(self.num_samples)
        return self._perms[epoch]

    def stream(self, start: int, count: int) -> np.ndarray:
        """Training indices ``start .. start + count - 1`` of the stream (epoch after epoch), int64."""
        n, parts = self.num_samples, []
        while count > 0:
            epoch, at = divmod(start, n)
            k = min(count, n - at)
            parts.append(self._perm(epoch)[at:at + k])
            start, count = start + k, count - k
        return np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64)

    def take(self, position: int, sizes) -> tuple[torch.Tensor, torch.Tensor]:
        """This worker's slice of the step whose samples start at ``position`` of the stream.

        Parameters
        ----------
        position : int
            Samples taken by all workers before this step.
        sizes : sequence of int
            Every worker's batch size this step.
        """
        offset = int(sum(sizes[:self.rank]))
        t = torch.from_numpy(self.stream(position + offset, int(sizes[self.rank]))).to(self.x_train.device)
        return self.x_train[t], self.y_train[t]

    @torch.no_grad()
    def accuracy(self, model) -> float:
        """Top-1 accuracy of ``model`` on the held-out digits."""
        model.eval()
        pred = model(self.x_test).argmax(1)
        model.train()
        return float((pred == self.y_test).double().mean())


def build_data(task: str, batch: int, image_size: int, seed: int, comm, device: str = "cpu"):
    """The data of ``task`` (``"synthetic"``, ``"digits"`` or ``"shakespeare"``) for this rank, on torch device
    ``device``; collective over ``comm`` (rank 0 loads a real data set and broadcasts it)."""
    if task == "synthetic":
        return SyntheticImages(batch, image_size, seed, comm.rank, device)
    from hpcbench.runtime.wait import sleep_bcast

    if task == "shakespeare":
        from hpcbench.train.text import ShakespeareTask as cls
    else:
        cls = DigitsTask
    arrays = sleep_bcast(comm, cls.load(seed) if comm.rank == 0 else None)
    return cls(seed, comm.rank, comm.size, arrays, device)

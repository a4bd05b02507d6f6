"""Training data by task name: KungFu's synthetic ImageNet batch, or a bundled data set split across workers.

Both serve :meth:`take`: the batch of one worker at a position of the
training stream, for the batch sizes of the step (one per worker, from
:class:`hpcbench.train.steps.context.BatchState`, the one place that holds them).
The stream is a sequence of epochs, each a permutation of the training set
(KungFu's ``PolicyHook`` counts epochs as ``trained_samples // epoch_size``):
a step takes the next ``sum(sizes)`` samples, worker ``r`` the slice after
the first ``sum(sizes[:r])``, so a batch size that changes at run time never
skips or repeats a sample within an epoch.
"""

from __future__ import annotations

import torch

from hpcbench.runtime.wait import sleep_bcast
from hpcbench.train.workloads.digits import DigitsTask
from hpcbench.train.workloads.text import ShakespeareTask

__all__ = ["SyntheticImages", "build_data"]


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


def build_data(task: str, batch: int, image_size: int, seed: int, comm, device: str = "cpu"):
    """The data of ``task`` (``"synthetic"``, ``"digits"`` or ``"shakespeare"``) for this rank, on torch device
    ``device``; collective over ``comm`` (rank 0 loads a real data set and broadcasts it)."""
    if task == "synthetic":
        return SyntheticImages(batch, image_size, seed, comm.rank, device)
    cls = ShakespeareTask if task == "shakespeare" else DigitsTask
    arrays = sleep_bcast(comm, cls.load(seed) if comm.rank == 0 else None)
    return cls(seed, comm.rank, comm.size, arrays, device)

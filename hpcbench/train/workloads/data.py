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

from hpcbench.runtime.errors import InputError
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

    @property
    def input_shape(self) -> tuple[int, int, int]:
        """``(3, image_size, image_size)``."""
        return (3, self.image_size, self.image_size)

    def sample_inputs(self, k: int) -> torch.Tensor:
        """``k`` random inputs on the CPU (a user model's check)."""
        return torch.randn(k, *self.input_shape, generator=torch.Generator().manual_seed(self.seed))

    def take(self, position: int, sizes) -> tuple[torch.Tensor, torch.Tensor]:
        """Inputs and labels of this worker's ``sizes[rank]`` samples (the same batch whatever ``position``)."""
        b = int(sizes[self.rank])
        if b not in self._batches:
            self._batches[b] = self._draw(b, torch.Generator().manual_seed((self.seed * 100003 + self.rank) * 1009 + b))
        return self._batches[b]

    def accuracy(self, model) -> float:
        """NaN: random labels have no accuracy to measure."""
        return float("nan")


def build_data(task: str, batch: int, image_size: int, seed: int, comm, device: str = "cpu", dataset=None):
    """The data of ``task`` for this rank, on torch device ``device``; collective over ``comm``.

    Parameters
    ----------
    task : str
        ``"synthetic"``, ``"digits"``, ``"shakespeare"``, ``"fashion_mnist"``, ``"idx"`` or a user's
        ``package.module:callable`` (:mod:`hpcbench.train.workloads.datasets`).
    batch, image_size, seed : int
    comm : mpi4py.MPI.Comm
    device : str
    dataset : hpcbench.train.config.TrainDatasetConfig, optional
        The job's ``dataset`` section (needed for ``fashion_mnist``, ``idx`` and callables) (path, prefix, held-out size, a factory's options).

    Raises
    ------
    InputError
        On every rank, when rank 0 cannot read the data (it reads them and broadcasts them, or the error).
    """
    if task == "synthetic":
        return SyntheticImages(batch, image_size, seed, comm.rank, device)
    from hpcbench.train.workloads.arrays import ArrayTask, load_arrays

    cls = ShakespeareTask if task == "shakespeare" else DigitsTask if task == "digits" else ArrayTask
    arrays, error = None, None
    if comm.rank == 0:
        try:
            arrays = cls.load(seed) if cls is not ArrayTask else load_arrays(task, dataset, seed)
        except InputError as exc:
            error = str(exc)
    arrays, error = sleep_bcast(comm, (arrays, error))
    if error is not None:
        raise InputError(error)
    return cls(seed, comm.rank, comm.size, arrays, device)

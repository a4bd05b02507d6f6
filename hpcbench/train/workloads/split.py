"""An in-memory data set split across data-parallel workers (the bundled digits and Shakespeare text are two).

Served through :meth:`SplitTask.take`: the batch of one worker at a position of the training stream, for the
batch sizes of the step (one per worker, from :class:`hpcbench.train.steps.context.BatchState`, the one place
that holds them). The stream is a sequence of epochs, each a permutation of the training set (KungFu's
``PolicyHook`` counts epochs as ``trained_samples // epoch_size``): a step takes the next ``sum(sizes)``
samples, worker ``r`` the slice after the first ``sum(sizes[:r])``, so a batch size that changes at run time
never skips or repeats a sample within an epoch.
"""

from __future__ import annotations

import numpy as np
import torch

__all__ = ["SplitTask"]


class SplitTask:
    """An in-memory data set split across workers: a training set streamed epoch after epoch, a held-out set.

    The training stream is one seeded permutation per epoch
    (``default_rng([seed, epoch])``, the same on every rank), concatenated:
    a step takes the next ``sum(sizes)`` samples of the stream (a step may
    span two epochs, as KungFu's input pipelines that repeat the dataset) and
    worker ``r`` takes its slice, so the union of the workers' batches is what
    one process training on the global batch would see, and every sample is
    seen exactly once per epoch whatever the batch sizes. A subclass names
    its ``classes`` and reads its arrays in :meth:`load`. uint8 inputs (images
    as stored) stay uint8 in memory and are scaled to float32 in [0, 1] per
    batch (60,000 Fashion-MNIST images: 47 MB instead of 188 MB per rank).

    Parameters
    ----------
    seed : int
    rank, world_size : int
        This worker and the number of workers.
    arrays : tuple of ndarray, optional
        ``(x_train, y_train, x_test, y_test)`` when loaded already (rank 0
        loads and broadcasts); else :meth:`load` reads them.
    device : str
        torch device the data live on (all of it is copied there once).
    """

    #: classes of the labels
    classes: int

    def __init__(self, seed: int, rank: int, world_size: int, arrays=None, device: str = "cpu") -> None:
        self.x_train, self.y_train, self.x_test, self.y_test = (
            torch.from_numpy(a).to(device) for a in (arrays if arrays is not None else self.load(seed)))
        self.seed, self.rank, self.world_size = seed, rank, world_size
        self._perms: dict[int, np.ndarray] = {}

    @staticmethod
    def load(seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """``(x_train, y_train, x_test, y_test)`` of the data set, split with ``seed``."""
        raise NotImplementedError

    @property
    def input_shape(self) -> tuple[int, ...]:
        """One sample's input shape (``(C, H, W)`` for images, ``(T,)`` for character windows)."""
        return tuple(int(d) for d in self.x_train.shape[1:])

    @staticmethod
    def inputs(x: torch.Tensor) -> torch.Tensor:
        """Model inputs from stored ones: uint8 scaled to float32 in [0, 1], others as they are."""
        return x.float().div_(255.0) if x.dtype == torch.uint8 else x

    def sample_inputs(self, k: int) -> torch.Tensor:
        """The first ``k`` held-out inputs as the model reads them, on the CPU (a user model's check)."""
        return self.inputs(self.x_test[:k]).cpu()

    @property
    def num_samples(self) -> int:
        """Training samples (one epoch)."""
        return len(self.y_train)

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
        return self.inputs(self.x_train[t]), self.y_train[t]

    #: held-out samples per forward pass of :meth:`accuracy` (bounds its activations)
    eval_batch = 500

    @torch.no_grad()
    def accuracy(self, model) -> float:
        """Top-1 accuracy of ``model`` on the held-out set (in passes of :attr:`eval_batch` samples)."""
        model.eval()
        hits = sum(int((model(self.inputs(self.x_test[i:i + self.eval_batch])).argmax(1)
                        == self.y_test[i:i + self.eval_batch]).sum())
                   for i in range(0, len(self.y_test), self.eval_batch))
        model.train()
        return hits / self.y_test.numel()

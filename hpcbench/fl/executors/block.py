"""The result block: what executors send back for a batch of client tasks (no MPI here).

One byte buffer holds ``n`` rows of metadata (``META`` float64 each) then
``n`` updates (float32, ``P`` each); :class:`ResultBlock` is the two views.
They travel as two transfers, so that the aggregator receives them straight
into rows of its own block.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["META", "ResultBlock"]

#: metadata columns of a row: num_examples, train_loss, train_wall_s, train_cpu_s, utility, global_loss
META = 6


@dataclass
class ResultBlock:
    """``n`` client tasks' metadata and updates.

    Attributes
    ----------
    meta : ndarray of shape (n, META), float64
        Per task: examples, training loss, training wall and CPU seconds, Oort utility, global-model loss.
    deltas : ndarray of shape (n, P), float32
        Per task: local minus start parameters (after the uplink codec, once the aggregator encoded them).
    """

    meta: np.ndarray
    deltas: np.ndarray

    @classmethod
    def empty(cls, n: int, num_params: int) -> ResultBlock:
        """A new block of ``n`` rows over one byte buffer (uninitialised)."""
        meta_bytes = n * META * 8
        buf = np.empty(meta_bytes + n * num_params * 4, dtype=np.uint8)
        return cls(buf[:meta_bytes].view(np.float64).reshape(n, META),
                   buf[meta_bytes:].view(np.float32).reshape(n, num_params))

    @classmethod
    def collecting(cls, n: int, num_params: int) -> ResultBlock:
        """A new block of ``n`` rows over two arrays (uninitialised): the aggregator's, whose rows receive executors'
        blocks."""
        return cls(np.empty((n, META)), np.empty((n, num_params), np.float32))

    def __len__(self) -> int:
        return len(self.meta)

    def rows(self, lo: int, hi: int) -> ResultBlock:
        """Rows ``lo:hi`` as a block of views (C-contiguous)."""
        return ResultBlock(self.meta[lo:hi], self.deltas[lo:hi])

    def store(self, i: int, result, copy: bool = True) -> None:
        """Write a :class:`hpcbench.fl.training_result.LocalResult` into row ``i``.

        ``copy=False``: its update is already row ``i`` of :attr:`deltas`.
        """
        if copy:
            self.deltas[i] = result.delta
        self.meta[i] = (result.num_examples, result.train_loss, result.train_wall_s, result.train_cpu_s,
                        result.utility, result.global_loss)

    @property
    def num_examples(self) -> np.ndarray:
        return self.meta[:, 0]

    @property
    def train_loss(self) -> np.ndarray:
        return self.meta[:, 1]

    @property
    def train_wall_s(self) -> np.ndarray:
        return self.meta[:, 2]

    @property
    def train_cpu_s(self) -> np.ndarray:
        return self.meta[:, 3]

    @property
    def utility(self) -> np.ndarray:
        return self.meta[:, 4]

    @property
    def global_loss(self) -> np.ndarray:
        return self.meta[:, 5]

"""The federated dataset abstraction: registered clients as CSR metadata, shards on demand.

Torch-free at import: only the torch engines' shards and test sets are torch
tensors (``client_training: numpy`` never imports torch).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass

from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:  # torch is imported only where a torch engine needs it
    import torch

__all__ = ["ClientShard", "FederatedDataset"]


@dataclass
class ClientShard:
    """One selected client's local data, materialised for training.

    Attributes
    ----------
    client_id : int
    num_examples : int
        Number of local training examples (FedAvg weight).
    """

    client_id: int
    num_examples: int
    _inputs: torch.Tensor
    _targets: torch.Tensor
    _window: int = 0

    def batch(self, idx: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Inputs and targets of local examples ``idx`` (int64 tensor of shape (B,))."""
        if self._window:
            import torch

            pos = idx[:, None] + torch.arange(self._window)[None, :]
            return self._inputs[pos], self._inputs[pos + 1]
        return self._inputs[idx], self._targets[idx]


class FederatedDataset(ABC):
    """A real dataset split across registered clients.

    Subclasses hold the whole training set once per rank and the split as CSR
    metadata (``offsets``, ``indices``), so that registering a client costs a
    few bytes; :meth:`shard` materialises a client when it is selected.
    """

    name: str
    num_classes: int
    #: what a model must read: ``features`` (float vectors), ``tokens`` (int64 sequences) or
    #: ``images`` (float32 ``(C, H, W)``);
    #: a model fits a dataset when their ``input_kind`` agree (:class:`hpcbench.fl.contracts.FLModel`)
    input_kind: str

    @property
    @abstractmethod
    def num_clients(self) -> int:
        """Number of registered clients."""

    @abstractmethod
    def client_sizes(self) -> np.ndarray:
        """Local example count of every client, int64 array of shape (num_clients,)."""

    @abstractmethod
    def shard(self, client_id: int) -> ClientShard:
        """Materialise client ``client_id``'s local data."""

    @abstractmethod
    def test_set(self) -> tuple[torch.Tensor, torch.Tensor]:
        """Held-out test inputs and targets, evaluated by the aggregator."""

    def shard_arrays(self, client_id: int) -> tuple[np.ndarray, np.ndarray]:
        """Client ``client_id``'s local inputs and targets as numpy arrays (the numpy engine's shard).

        This default converts :meth:`shard`'s tensors (and so imports torch);
        a dataset holding numpy arrays overrides it.
        """
        shard = self.shard(client_id)
        return shard._inputs.numpy(), shard._targets.numpy()

    def test_arrays(self) -> tuple[np.ndarray, np.ndarray]:
        """:meth:`test_set` as numpy arrays (this default converts the tensors)."""
        x, y = self.test_set()
        return x.numpy(), y.numpy()

    def metadata_nbytes(self) -> int:
        """Bytes held for the client split (the per-client metadata)."""
        return 0

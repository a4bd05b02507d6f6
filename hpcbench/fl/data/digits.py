"""scikit-learn's handwritten digits (1,797 real 8x8 images), split across clients."""

from __future__ import annotations

import numpy as np

from hpcbench.datasets.digits import read_digits
from hpcbench.fl.data.base import ClientShard, FederatedDataset
from hpcbench.fl.data.partition import dirichlet_partition, iid_partition, sampled_partition

__all__ = ["DigitsDataset"]


class DigitsDataset(FederatedDataset):
    """UCI handwritten digits as bundled with scikit-learn (``load_digits``).

    Features are the 64 pixel intensities scaled to [0, 1] (float32, shape
    (n, 64)); labels are 0-9 (int64). A stratified, seeded ``test_fraction``
    is held out for the aggregator's evaluation; the rest is split across
    ``num_clients`` by :mod:`hpcbench.fl.data.partition`.

    Parameters
    ----------
    cfg : hpcbench.fl.config.DatasetConfig
    seed : int
    inputs : tuple of ndarray, optional
        What :meth:`load_inputs` returns, when already loaded elsewhere.
    """

    name = "digits"
    num_classes = 10
    input_kind = "features"

    @staticmethod
    def load_inputs(cfg, seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """``(x_train, x_test, y_train, y_test)``: the seeded stratified split (float32, int64).

        The one step that needs scikit-learn's splitter (its import takes a second); a job runs
        it on rank 0 and broadcasts the arrays (:func:`hpcbench.fl.data.build_dataset`).
        """
        from sklearn.model_selection import train_test_split

        x, y = read_digits()
        return tuple(train_test_split(x, y, test_size=cfg.test_fraction, random_state=seed, stratify=y))

    def __init__(self, cfg, seed: int, inputs=None) -> None:
        x_train, x_test, y_train, y_test = self.load_inputs(cfg, seed) if inputs is None else inputs
        self._x = np.ascontiguousarray(x_train, dtype=np.float32)
        self._y = np.ascontiguousarray(y_train, dtype=np.int64)
        self._x_test = np.ascontiguousarray(x_test, dtype=np.float32)
        self._y_test = np.ascontiguousarray(y_test, dtype=np.int64)
        rng = np.random.default_rng([seed, 0x5EED])
        if cfg.samples_per_client is not None:
            alpha = None if cfg.partition == "iid" else cfg.alpha
            self.offsets, self.indices = sampled_partition(y_train, cfg.num_clients,
                                                           cfg.samples_per_client, alpha, rng)
        elif cfg.partition == "iid":
            self.offsets, self.indices = iid_partition(len(y_train), cfg.num_clients, rng)
        else:
            self.offsets, self.indices = dirichlet_partition(y_train, cfg.num_clients, cfg.alpha, rng)

    @property
    def num_clients(self) -> int:
        return len(self.offsets) - 1

    @property
    def num_features(self) -> int:
        return int(self._x.shape[1])

    def client_sizes(self) -> np.ndarray:
        return np.diff(self.offsets)

    def client_labels(self, client_id: int) -> np.ndarray:
        """Labels of a client's samples (int64), e.g. to inspect label skew."""
        idx = self.indices[self.offsets[client_id]:self.offsets[client_id + 1]]
        return self._y[idx]

    def shard(self, client_id: int) -> ClientShard:
        import torch

        x, y = self.shard_arrays(client_id)
        return ClientShard(client_id, len(y), torch.from_numpy(x), torch.from_numpy(y))

    def shard_arrays(self, client_id: int) -> tuple[np.ndarray, np.ndarray]:
        idx = self.indices[self.offsets[client_id]:self.offsets[client_id + 1]]
        return self._x[idx], self._y[idx]

    def training_pool(self) -> tuple[np.ndarray, np.ndarray, float | None]:
        """The training samples ``indices`` points into: float32 ``(n, 64)`` inputs, int64 ``(n,)`` labels, no scale."""
        return self._x, self._y, None

    def test_set(self):
        import torch

        return torch.from_numpy(self._x_test), torch.from_numpy(self._y_test)

    def test_arrays(self) -> tuple[np.ndarray, np.ndarray]:
        return self._x_test, self._y_test

    def metadata_nbytes(self) -> int:
        return int(self.offsets.nbytes + self.indices.nbytes)

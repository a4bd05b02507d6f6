"""A dataset held as arrays (images, feature vectors or token windows), read once per node.

The readers of real layouts (:mod:`.idx`, :mod:`.leaf`, :mod:`.fedscale`,
:mod:`.callable`) subclass :class:`ArrayDataset`: each gives a static
``load_arrays(cfg, seed)`` that reads the files, and
:func:`hpcbench.fl.data.build_dataset` runs it once per node
(:func:`hpcbench.datasets.nodeshare.node_shared`), so every rank of the node
maps the same read-only training set; the split across clients is CSR
metadata computed on each rank from the seed.
"""

from __future__ import annotations

import numpy as np

from hpcbench.fl.data.base import ClientShard, FederatedDataset
from hpcbench.fl.data.partition import (dirichlet_partition, iid_partition, natural_partition,
                                        quantity_partition, sampled_partition)

__all__ = ["ArrayDataset", "split_arrays"]

#: the arrays ``load_arrays`` returns: name -> what it holds
ARRAY_KEYS = {
    "x_train": "inputs: uint8 (scaled by 1/255), float32 or int64 (tokens); shape (n, *input_shape)",
    "y_train": "int64 labels, shape (n,) (or (n, T) for next-token targets)",
    "x_test": "as x_train, shape (n_test, *input_shape)",
    "y_test": "as y_train",
    "clients": "optional: int64 (n,), each training sample's client (the natural partition)",
}


def split_arrays(arrays: dict, name: str) -> None:
    """Check ``load_arrays``' result against :data:`ARRAY_KEYS` (shapes and dtypes).

    Raises
    ------
    ValueError
        Naming the dataset, the array and what is wrong.
    """
    for key in ("x_train", "y_train", "x_test", "y_test"):
        if key not in arrays:
            raise ValueError(f"{name}: no {key!r} array")
    for split in ("train", "test"):
        x, y = np.asarray(arrays[f"x_{split}"]), np.asarray(arrays[f"y_{split}"])
        if x.dtype not in (np.uint8, np.float32, np.int64) or x.ndim < 2:
            raise ValueError(f"{name}: x_{split} must be uint8, float32 or int64 of shape (n, ...), got "
                             f"{x.dtype} {x.shape}")
        if y.dtype != np.int64 or y.ndim not in (1, 2) or len(y) != len(x):
            raise ValueError(f"{name}: y_{split} must be int64 of shape ({len(x)},) or ({len(x)}, T), got "
                             f"{y.dtype} {y.shape}")
        if len(y) and y.min() < 0:
            raise ValueError(f"{name}: y_{split} has negative labels")
    if arrays["x_train"].shape[1:] != arrays["x_test"].shape[1:] or len(arrays["x_train"]) == 0:
        raise ValueError(f"{name}: x_train {arrays['x_train'].shape} and x_test {arrays['x_test'].shape} "
                         f"differ in sample shape, or the training set is empty")
    clients = arrays.get("clients")
    if clients is not None and (np.asarray(clients).dtype != np.int64 or np.shape(clients) != (len(arrays["y_train"]),)):
        raise ValueError(f"{name}: clients must be int64 of shape ({len(arrays['y_train'])},), got "
                         f"{np.asarray(clients).dtype} {np.shape(clients)}")


class ArrayDataset(FederatedDataset):
    """A training and a test set as arrays, split across clients by ``dataset.partition``.

    ``natural`` takes the dataset's own clients (``clients`` of
    :data:`ARRAY_KEYS`; LEAF's users, FedScale's ``client_id``);
    ``samples_per_client`` then and ``num_clients`` do not apply. Otherwise
    the training set is split as digits is (``iid``, ``dirichlet``,
    ``quantity``, or drawn per client with ``samples_per_client``). At most
    ``max_test_samples`` test samples (a seeded subset) are evaluated.

    Parameters
    ----------
    cfg : hpcbench.fl.config.DatasetConfig
    seed : int
    arrays : dict of str to ndarray
        What ``load_arrays(cfg, seed)`` returned (:data:`ARRAY_KEYS`); kept as given (no copy).

    Attributes
    ----------
    input_shape : tuple of int
        One sample's input shape: ``(C, H, W)`` for images, ``(F,)`` for features, ``(T,)`` for tokens.
    """

    def __init__(self, cfg, seed: int, arrays: dict) -> None:
        split_arrays(arrays, self.name)
        self._x, self._y = arrays["x_train"], arrays["y_train"]
        self.input_shape = tuple(int(d) for d in self._x.shape[1:])
        self._scale = np.float32(1.0 / 255.0) if self._x.dtype == np.uint8 else None
        labels = np.concatenate([self._y.reshape(-1), arrays["y_test"].reshape(-1)])
        self.num_classes = max(int(labels.max()) + 1, getattr(self, "min_classes", 0))
        rng = np.random.default_rng([seed, 0x5EED])
        n = len(self._y)
        if cfg.partition == "natural":
            if arrays.get("clients") is None:
                raise ValueError(f"dataset {self.name!r} has no natural client partition; use dirichlet, iid "
                                 f"or quantity")
            self.offsets, self.indices = natural_partition(arrays["clients"])
        elif self._y.ndim != 1 and cfg.partition == "dirichlet":
            raise ValueError(f"dataset {self.name!r} has sequence targets: partition dirichlet needs one label per "
                             f"sample; use natural, iid or quantity")
        elif cfg.samples_per_client is not None and cfg.partition != "quantity":
            alpha = None if cfg.partition == "iid" else cfg.alpha
            self.offsets, self.indices = sampled_partition(self._y if self._y.ndim == 1 else np.zeros(n, np.int64),
                                                           cfg.num_clients, cfg.samples_per_client, alpha, rng)
        elif cfg.partition == "iid":
            self.offsets, self.indices = iid_partition(n, cfg.num_clients, rng)
        elif cfg.partition == "quantity":
            self.offsets, self.indices = quantity_partition(n, cfg.num_clients, cfg.power, rng)
        else:
            self.offsets, self.indices = dirichlet_partition(self._y, cfg.num_clients, cfg.alpha, rng)
        n_test = len(arrays["y_test"])
        self._test_rows = np.arange(n_test) if n_test <= cfg.max_test_samples else \
            np.sort(np.random.default_rng([seed, 0x7E57]).choice(n_test, cfg.max_test_samples, replace=False))
        self._x_test_stored, self._y_test_stored = arrays["x_test"], arrays["y_test"]
        self._test = None   # converted on first use: only the aggregator evaluates the whole test set

    def _inputs(self, x: np.ndarray) -> np.ndarray:
        """Model inputs from stored ones: uint8 scaled to float32 in [0, 1]; others as they are (a copy)."""
        if self._scale is not None:
            return x.astype(np.float32) * self._scale
        return np.array(x)

    @property
    def num_clients(self) -> int:
        return len(self.offsets) - 1

    @property
    def num_features(self) -> int:
        """Inputs per sample (a feature model's input width)."""
        return int(np.prod(self.input_shape))

    def client_sizes(self) -> np.ndarray:
        return np.diff(self.offsets)

    def client_labels(self, client_id: int) -> np.ndarray:
        """Labels of a client's samples (int64)."""
        return self._y[self.indices[self.offsets[client_id]:self.offsets[client_id + 1]]]

    def training_pool(self) -> tuple[np.ndarray, np.ndarray, float | None]:
        """The stored training samples ``indices`` points into, their labels, and the factor applied to uint8 inputs.

        Returns
        -------
        tuple
            ``(x, y, scale)``: ``x`` as stored (:data:`ARRAY_KEYS`, shape
            ``(n, *input_shape)``), ``y`` int64 ``(n,)`` (or ``(n, T)``),
            ``scale`` (1/255 for uint8 inputs, else None).
        """
        return self._x, self._y, None if self._scale is None else float(self._scale)

    def shard_arrays(self, client_id: int) -> tuple[np.ndarray, np.ndarray]:
        idx = self.indices[self.offsets[client_id]:self.offsets[client_id + 1]]
        return self._inputs(self._x[idx]), np.array(self._y[idx])

    def shard(self, client_id: int) -> ClientShard:
        import torch

        x, y = self.shard_arrays(client_id)
        return ClientShard(client_id, len(y), torch.from_numpy(x), torch.from_numpy(y))

    def test_set(self):
        import torch

        x, y = self.test_arrays()
        return torch.from_numpy(x), torch.from_numpy(y)

    def test_arrays(self) -> tuple[np.ndarray, np.ndarray]:
        if self._test is None:
            self._test = (self._inputs(self._x_test_stored[self._test_rows]),
                          np.array(self._y_test_stored[self._test_rows], dtype=np.int64))
        return self._test

    def metadata_nbytes(self) -> int:
        return int(self.offsets.nbytes + self.indices.nbytes)

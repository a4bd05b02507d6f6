"""Image sets read from files (Fashion-MNIST, any IDX set) and a user's arrays, as data-parallel training tasks.

Read by rank 0 (:func:`hpcbench.train.workloads.data.build_data`) through
core's readers (:func:`hpcbench.datasets.idx.load_idx_set`,
:func:`hpcbench.datasets.callables.load_user_arrays`) and streamed as
:class:`~hpcbench.train.workloads.split.SplitTask` streams the digits: the
set's own test split is the held-out set (a seeded ``dataset.max_test_samples``
of it). Images stay uint8 as stored and are scaled to [0, 1] per batch.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from hpcbench.datasets.idx import FASHION_MNIST_DIR, FASHION_MNIST_HOWTO
from hpcbench.runtime.errors import InputError
from hpcbench.train.workloads.split import SplitTask

__all__ = ["ArrayTask", "load_arrays"]


class ArrayTask(SplitTask):
    """A training and a held-out set given as arrays; the classes are the largest label of both plus one.

    Parameters
    ----------
    seed : int
    rank, world_size : int
    arrays : tuple of ndarray
        ``(x_train, y_train, x_test, y_test)`` (:func:`load_arrays`).
    device : str
    """

    def __init__(self, seed: int, rank: int, world_size: int, arrays, device: str = "cpu") -> None:
        self.classes = int(max(arrays[1].max(), arrays[3].max())) + 1
        super().__init__(seed, rank, world_size, arrays, device)


def _test_subset(x: np.ndarray, y: np.ndarray, most: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    if len(y) <= most:
        return x, y
    rows = np.sort(np.random.default_rng([seed, 0x7E57]).choice(len(y), most, replace=False))
    return x[rows], y[rows]


def load_arrays(name: str, section, seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """``(x_train, y_train, x_test, y_test)`` of data set ``name`` (``fashion_mnist``, ``idx`` or a callable).

    Parameters
    ----------
    name : str
    section : hpcbench.train.config.TrainDatasetConfig
        The job's ``dataset`` section (path, prefix, held-out size, a factory's options).
    seed : int

    Returns
    -------
    tuple of ndarray
        Images uint8 or float32 ``(n, C, H, W)`` (IDX sets: ``C = 1``) or features ``(n, F)``, labels int64.

    Raises
    ------
    InputError
        A missing folder (naming it and, for Fashion-MNIST, ``apt-get install dataset-fashion-mnist``),
        files that are not one IDX set, or a callable that breaks the contract.
    """
    from hpcbench.datasets.callables import is_callable_name, load_user_arrays
    from hpcbench.datasets.idx import IdxError, load_idx_set

    most = section.max_test_samples
    if is_callable_name(name):
        a = load_user_arrays(name, "dataset.name", section.model_dump(), seed)
        return (a["x_train"], a["y_train"], *_test_subset(a["x_test"], a["y_test"], most, seed))
    path = section.path or (FASHION_MNIST_DIR if name == "fashion_mnist" else None)
    if path is None:
        raise InputError(f"dataset.path: dataset {name!r} needs the folder of its IDX files")
    if not Path(path).is_dir():
        how = f"; Fashion-MNIST's files come with '{FASHION_MNIST_HOWTO}' (into {FASHION_MNIST_DIR})" \
            if name == "fashion_mnist" else ""
        raise InputError(f"dataset.path {path!r}: no such folder of IDX files{how}")
    try:
        a = load_idx_set(path, section.prefix)
    except (OSError, IdxError) as exc:
        raise InputError(f"dataset.path {path!r}: {exc}") from None
    return (a["x_train"][:, None], a["y_train"], *_test_subset(a["x_test"][:, None], a["y_test"], most, seed))

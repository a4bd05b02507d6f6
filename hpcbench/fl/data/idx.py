"""Image sets in MNIST's IDX format: Fashion-MNIST by default, MNIST, EMNIST or KMNIST from any folder."""

from __future__ import annotations

from pathlib import Path

from hpcbench.datasets.idx import FASHION_MNIST_DIR, FASHION_MNIST_HOWTO
from hpcbench.fl.data.arrays import ArrayDataset

__all__ = ["FASHION_MNIST_DIR", "IdxDataset", "FashionMnistDataset"]



class IdxDataset(ArrayDataset):
    """The four IDX files of one set in ``dataset.path`` (:func:`hpcbench.datasets.idx.find_idx_set`).

    Images are uint8 ``(n, rows, cols)``, trained as float32 ``(1, rows, cols)``
    in [0, 1]; the classes are the labels 0..max. The set's own test files
    are the test set. ``dataset.prefix`` picks one set of a folder that holds
    several (EMNIST's ``emnist-balanced-``).
    """

    name = "idx"
    input_kind = "images"

    @classmethod
    def default_path(cls) -> str | None:
        """The folder read when ``dataset.path`` is unset (None: the key is required)."""
        return None

    @classmethod
    def load_arrays(cls, cfg, seed: int) -> dict:
        """The set's arrays (:data:`hpcbench.fl.data.arrays.ARRAY_KEYS`), images as ``(n, 1, rows, cols)``.

        Raises
        ------
        FileNotFoundError
            The folder does not exist (the message says how to get the files).
        ValueError
            Its files are not one IDX set.
        """
        from hpcbench.datasets.idx import load_idx_set

        path = cfg.path or cls.default_path()
        if path is None:
            raise ValueError(f"dataset {cls.name!r} needs dataset.path, the folder of its IDX files")
        if not Path(path).is_dir():
            raise FileNotFoundError(cls.missing(path))
        arrays = load_idx_set(path, cfg.prefix)
        for split in ("train", "test"):
            arrays[f"x_{split}"] = arrays[f"x_{split}"][:, None]
        return arrays

    @classmethod
    def missing(cls, path: str) -> str:
        """The message for a missing folder."""
        return f"dataset.path {path!r}: no such folder of IDX files"

    def __init__(self, cfg, seed: int, arrays: dict | None = None) -> None:
        super().__init__(cfg, seed, self.load_arrays(cfg, seed) if arrays is None else arrays)


class FashionMnistDataset(IdxDataset):
    """Fashion-MNIST (Xiao, Rasul and Vollgraf 2017: 60,000 + 10,000 28 x 28 grey images, 10 classes, MIT).

    Read from ``dataset.path``, by default :data:`FASHION_MNIST_DIR`, where
    ``apt-get install dataset-fashion-mnist`` puts the four ``.gz`` IDX files.
    """

    name = "fashion_mnist"

    @classmethod
    def default_path(cls) -> str:
        return FASHION_MNIST_DIR

    @classmethod
    def missing(cls, path: str) -> str:
        return (f"dataset.path {path!r}: no such folder; Fashion-MNIST's IDX files come with "
                f"'{FASHION_MNIST_HOWTO}' (into {FASHION_MNIST_DIR}) or from the dataset's "
                f"site, in a folder named by dataset.path")

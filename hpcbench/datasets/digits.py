"""scikit-learn's handwritten digits (1,797 real 8x8 images, 10 classes), read without importing scikit-learn.

Reads the package's bundled ``datasets/data/digits.csv.gz`` (64 pixel values, 0-16, and the label per row:
what ``sklearn.datasets.load_digits`` reads, with the same ``numpy.loadtxt``), so that the ~1 s import of
scikit-learn is not paid. The UCI data set (Alpaydin and Kaynak, 1998), as scikit-learn ships it.
"""

from __future__ import annotations

import gzip
import importlib.util
from pathlib import Path

import numpy as np

__all__ = ["read_digits", "NUM_CLASSES"]

#: label classes (0-9)
NUM_CLASSES = 10


def read_digits() -> tuple[np.ndarray, np.ndarray]:
    """The digits: pixels scaled to [0, 1] and their labels.

    Returns
    -------
    x : numpy.ndarray of float32, shape (1797, 64)
        Pixel intensities over 16 (row-major 8x8), bit for bit ``(load_digits().data / 16.0).astype(float32)``.
    y : numpy.ndarray of int64, shape (1797,)
        Labels 0-9.

    Raises
    ------
    ImportError
        scikit-learn (which carries the file) is not installed.
    """
    spec = importlib.util.find_spec("sklearn")
    if spec is None or not spec.submodule_search_locations:
        raise ImportError("the digits come with scikit-learn, which is not installed")
    path = Path(list(spec.submodule_search_locations)[0]) / "datasets" / "data" / "digits.csv.gz"
    with gzip.open(path, "rt") as f:
        raw = np.loadtxt(f, delimiter=",", dtype=np.float64)
    return (raw[:, :64] / 16.0).astype(np.float32), raw[:, 64].astype(np.int64)

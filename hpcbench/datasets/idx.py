"""The IDX file format of MNIST and its successors (Fashion-MNIST, EMNIST, KMNIST), gzip or plain.

An IDX file (LeCun et al., the MNIST database's page) is a 4-byte magic
number ``0x00 0x00 TYPE NDIM``, ``NDIM`` big-endian uint32 dimension sizes,
then the data in row-major order, big-endian. ``TYPE``: 0x08 uint8, 0x09
int8, 0x0B int16, 0x0C int32, 0x0D float32, 0x0E float64. Image files have
``NDIM = 3`` (count, rows, columns), label files ``NDIM = 1``.
"""

from __future__ import annotations

import gzip
from pathlib import Path

import numpy as np

__all__ = ["IdxError", "read_idx", "find_idx_set", "load_idx_set", "FASHION_MNIST_DIR", "FASHION_MNIST_HOWTO"]

#: where Debian's ``dataset-fashion-mnist`` package installs Fashion-MNIST's four IDX files
FASHION_MNIST_DIR = "/usr/share/datasets/fashion-mnist"
#: how to get them there
FASHION_MNIST_HOWTO = "apt-get install dataset-fashion-mnist"

#: IDX type byte -> big-endian numpy dtype
_TYPES = {0x08: ">u1", 0x09: ">i1", 0x0B: ">i2", 0x0C: ">i4", 0x0D: ">f4", 0x0E: ">f8"}


class IdxError(ValueError):
    """A file is not IDX, or a folder does not hold one IDX training and test set."""


def read_idx(path: str | Path) -> np.ndarray:
    """One IDX file (``.gz`` decompressed) as a native-endian array.

    Parameters
    ----------
    path : str or pathlib.Path

    Returns
    -------
    ndarray
        Shape the file's dimensions; dtype its type (uint8 for images and labels of MNIST-like sets).

    Raises
    ------
    IdxError
        Bad magic number, unknown type, or a size that does not match the dimensions.
    OSError
        The file cannot be read (or is not valid gzip).
    """
    path = Path(path)
    opener = gzip.open if path.name.endswith(".gz") else open
    with opener(path, "rb") as f:
        raw = f.read()
    if len(raw) < 4 or raw[0] != 0 or raw[1] != 0 or raw[2] not in _TYPES:
        raise IdxError(f"{path}: not an IDX file (magic {raw[:4].hex() or 'missing'}; expected 0000TTNN "
                       f"with type TT one of {', '.join(f'{t:02x}' for t in _TYPES)})")
    ndim = raw[3]
    head = 4 + 4 * ndim
    if ndim == 0 or len(raw) < head:
        raise IdxError(f"{path}: IDX header with {ndim} dimensions is truncated")
    dims = tuple(int(d) for d in np.frombuffer(raw, dtype=">u4", count=ndim, offset=4))
    dtype = np.dtype(_TYPES[raw[2]])
    need = int(np.prod(dims, dtype=np.int64)) * dtype.itemsize
    if len(raw) - head != need:
        raise IdxError(f"{path}: dimensions {dims} of {dtype.str} need {need} bytes of data, the file has "
                       f"{len(raw) - head}")
    return np.frombuffer(raw, dtype=dtype, offset=head).reshape(dims).astype(dtype.newbyteorder("="))


def _pick(folder: Path, prefix: str, split_words: tuple[str, ...], kind: str) -> Path:
    found = sorted(p for p in folder.iterdir() if p.is_file() and p.name.startswith(prefix)
                   and any(w in p.name for w in split_words) and kind in p.name
                   and (p.name.endswith("ubyte") or p.name.endswith("ubyte.gz")))
    what = f"{'/'.join(split_words)} {kind} file{f' starting with {prefix!r}' if prefix else ''}"
    if not found:
        raise IdxError(f"{folder}: no {what} (e.g. train-images-idx3-ubyte.gz, t10k-labels-idx1-ubyte)")
    plain = {p.name.removesuffix(".gz") for p in found}
    if len(plain) > 1:
        raise IdxError(f"{folder}: several {what}s ({', '.join(p.name for p in found)}); set dataset.prefix "
                       f"to the one set's file-name prefix")
    return found[0]


def find_idx_set(folder: str | Path, prefix: str = "") -> dict[str, Path]:
    """The four files of one IDX training and test set in ``folder``.

    Names follow MNIST's (``train-images-idx3-ubyte``, ``train-labels-idx1-ubyte``,
    ``t10k-images-idx3-ubyte``, ``t10k-labels-idx1-ubyte``; Fashion-MNIST and
    KMNIST use them too) or EMNIST's (``emnist-SPLIT-test-images-idx3-ubyte``);
    ``.gz`` or not. ``prefix`` selects one set of a folder holding several
    (EMNIST's ``emnist-balanced-``).

    Returns
    -------
    dict
        ``train_images``, ``train_labels``, ``test_images``, ``test_labels`` -> path.

    Raises
    ------
    FileNotFoundError
        ``folder`` is not a directory.
    IdxError
        A file is missing or ambiguous.
    """
    folder = Path(folder)
    if not folder.is_dir():
        raise FileNotFoundError(f"IDX folder {str(folder)!r} not found")
    return {f"{split}_{kind}": _pick(folder, prefix, words, "images" if kind == "images" else "labels")
            for split, words in (("train", ("train",)), ("test", ("t10k", "test")))
            for kind in ("images", "labels")}


def load_idx_set(folder: str | Path, prefix: str = "") -> dict[str, np.ndarray]:
    """Read :func:`find_idx_set`'s four files and check that they agree.

    Returns
    -------
    dict
        ``x_train`` uint8 (n, rows, cols), ``y_train`` int64 (n,), ``x_test``, ``y_test`` likewise.

    Raises
    ------
    FileNotFoundError, IdxError
        As :func:`find_idx_set` and :func:`read_idx`; also images that are not
        3-dimensional, labels that are not 1-dimensional, counts that differ,
        or train and test images of different sizes.
    """
    files = find_idx_set(folder, prefix)
    out = {}
    for split in ("train", "test"):
        x, y = read_idx(files[f"{split}_images"]), read_idx(files[f"{split}_labels"])
        if x.ndim != 3 or y.ndim != 1 or len(x) != len(y):
            raise IdxError(f"{files[f'{split}_images'].name} has shape {x.shape} and "
                           f"{files[f'{split}_labels'].name} {y.shape}; expected (n, rows, cols) images and "
                           f"(n,) labels of the same n")
        if y.size and (y.min() < 0 or not np.issubdtype(y.dtype, np.integer)):
            raise IdxError(f"{files[f'{split}_labels'].name}: labels must be non-negative integers")
        out[f"x_{split}"], out[f"y_{split}"] = np.ascontiguousarray(x), y.astype(np.int64)
    if out["x_train"].shape[1:] != out["x_test"].shape[1:]:
        raise IdxError(f"{folder}: training images are {out['x_train'].shape[1:]}, test images "
                       f"{out['x_test'].shape[1:]}")
    return out

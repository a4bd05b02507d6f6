"""FedScale's dataset layout (Lai et al. 2022, github.com/SymbioticLab/FedScale).

A FedScale dataset folder (its ``data_dir``) holds
``client_data_mapping/train.csv`` and ``test.csv`` (the ``data_map_file``),
one row per sample after a header row, ``client_id,sample_path,label_name,label_id``
for its image sets (FEMNIST, OpenImage). FedScale's partitioner
(``fedscale/dataloaders/divide_data.py``) numbers clients in order of first
appearance of their ``client_id``; its image loaders read the label from the
last column and open the sample with PIL, converted to RGB: FEMNIST at
``data_dir/sample_path`` (``femnist.py``), OpenImage at
``data_dir/<split>/sample_path`` (``openimage.py``). :func:`read_client_map`
and :func:`load_images` read the same files; a sample is looked up at
``data_dir/<split>/sample_path`` first, then at ``data_dir/sample_path``.
"""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np

__all__ = ["FedScaleError", "HEADER", "read_client_map", "load_images"]

#: the header of FedScale's image-set client maps
HEADER = ("client_id", "sample_path", "label_name", "label_id")


class FedScaleError(ValueError):
    """A client map or sample does not follow FedScale's layout."""


def read_client_map(path: str | Path) -> tuple[np.ndarray, list[str], np.ndarray]:
    """One ``client_data_mapping/*.csv`` file.

    Parameters
    ----------
    path : str or pathlib.Path

    Returns
    -------
    clients : ndarray of shape (n,), int64
        Each sample's client, numbered from 0 in order of first appearance (as FedScale's partitioner).
    paths : list of str
        Each sample's ``sample_path``.
    labels : ndarray of shape (n,), int64
        The last column (``label_id``).

    Raises
    ------
    FileNotFoundError
        No such file.
    FedScaleError
        The header does not start with ``client_id,sample_path``, a row has
        fewer than 3 columns or a label that is not a non-negative integer, or
        the file has no sample.
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"FedScale client map {str(path)!r} not found")
    numbers: dict[str, int] = {}
    clients, paths, labels = [], [], []
    with path.open(newline="", encoding="utf-8") as f:
        rows = csv.reader(f)
        header = next(rows, None)
        if header is None or [h.strip() for h in header[:2]] != list(HEADER[:2]):
            raise FedScaleError(f"{path}: header {header!r}; FedScale's client maps start with "
                                f"{','.join(HEADER)}")
        for line, row in enumerate(rows, start=2):
            if not row:
                continue
            if len(row) < 3:
                raise FedScaleError(f"{path}:{line}: {len(row)} columns; expected {','.join(HEADER)}")
            try:
                label = int(row[-1])
            except ValueError:
                label = -1
            if label < 0:
                raise FedScaleError(f"{path}:{line}: label {row[-1]!r} is not a non-negative integer")
            clients.append(numbers.setdefault(row[0], len(numbers)))
            paths.append(row[1])
            labels.append(label)
    if not paths:
        raise FedScaleError(f"{path}: no sample")
    return np.asarray(clients, dtype=np.int64), paths, np.asarray(labels, dtype=np.int64)


def load_images(data_dir: str | Path, split: str, paths: list[str], size: int, channels: int) -> np.ndarray:
    """Decode and resize the samples ``paths`` of ``split``.

    Parameters
    ----------
    data_dir : str or pathlib.Path
    split : {"train", "test"}
    paths : list of str
        ``sample_path`` values, relative to ``data_dir/split`` or ``data_dir``.
    size : int
        Output height and width in pixels (bilinear resize).
    channels : {1, 3}
        Grey (PIL mode ``L``) or RGB.

    Returns
    -------
    ndarray of shape (n, channels, size, size), uint8

    Raises
    ------
    FileNotFoundError
        A sample is in neither place (both are named).
    FedScaleError
        A sample is not an image PIL can read.
    """
    from PIL import Image, UnidentifiedImageError

    root = Path(data_dir)
    out = np.empty((len(paths), channels, size, size), dtype=np.uint8)
    mode = "L" if channels == 1 else "RGB"
    for i, rel in enumerate(paths):
        first, second = root / split / rel, root / rel
        where = first if first.is_file() else second
        if not where.is_file():
            raise FileNotFoundError(f"FedScale sample {rel!r} not found at {str(first)!r} nor {str(second)!r}")
        try:
            with Image.open(where) as img:
                arr = np.asarray(img.convert(mode).resize((size, size), Image.BILINEAR))
        except UnidentifiedImageError:
            raise FedScaleError(f"{where}: not an image") from None
        out[i] = arr[None] if channels == 1 else arr.transpose(2, 0, 1)
    return out

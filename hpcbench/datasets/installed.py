"""Data sets that are installed apart from hpcbench, by name: where each is read by default and how to get it.

A figure of ``jobs/reproduce.yaml`` that needs one says ``requires: {dataset: NAME}``; where
:func:`missing_dataset` gives a reason, ``hpcbench reproduce`` reports the figure n/a with it instead of
running jobs that would exit 2. The runners read the same default folders.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from hpcbench.datasets.idx import FASHION_MNIST_DIR, FASHION_MNIST_HOWTO, IdxError, find_idx_set

__all__ = ["InstalledDataset", "INSTALLED", "missing_dataset"]


@dataclass(frozen=True)
class InstalledDataset:
    """A data set read from a folder outside the package.

    Attributes
    ----------
    path : str
        The folder read by default.
    howto : str
        How to get the files there (a command).
    check : callable
        ``check(path)``: raises ``OSError`` or ``ValueError`` when the folder does not hold the data set.
    """

    path: str
    howto: str
    check: Callable[[str], object]


#: data set name -> where it is read and how to get it
INSTALLED: dict[str, InstalledDataset] = {
    "fashion_mnist": InstalledDataset(FASHION_MNIST_DIR, FASHION_MNIST_HOWTO, find_idx_set),
}


def missing_dataset(name: str) -> str | None:
    """Why data set ``name`` cannot be read from its default folder, or None when it can.

    Raises
    ------
    KeyError
        ``name`` is not in :data:`INSTALLED`.
    """
    entry = INSTALLED[name]
    if not Path(entry.path).is_dir():
        return f"{name} is not installed ({entry.path} missing; {entry.howto})"
    try:
        entry.check(entry.path)
    except (OSError, IdxError, ValueError) as exc:
        return f"{name} at {entry.path} is incomplete ({exc}; {entry.howto})"
    return None

"""The bundled Shakespeare text (Karpathy's tiny-shakespeare, 1,115,394 characters, 65 distinct) and its codes.

``hpcbench/data/shakespeare/tinyshakespeare.txt.gz`` (sources and licence in ``hpcbench/data/ATTRIBUTION.md``);
the federated runner splits it by role (LEAF's Shakespeare task), the training runner into windows.
"""

from __future__ import annotations

import functools
import gzip
from pathlib import Path

import numpy as np

__all__ = ["read_text", "vocabulary", "encode", "BUNDLED"]

#: the bundled text, relative to :data:`hpcbench.data.DATA_DIR`
BUNDLED = ("shakespeare", "tinyshakespeare.txt.gz")


@functools.lru_cache(maxsize=1)
def _bundled() -> str:
    from hpcbench.data import data_path

    return gzip.decompress(data_path(*BUNDLED).read_bytes()).decode("utf-8")


def read_text(path: str | Path | None = None, key: str = "dataset.path") -> str:
    """The text of ``path`` (plain, or gzipped when it ends in ``.gz``), or the bundled text (read once).

    The file is read through :func:`hpcbench.runtime.bounded.read_input`: a
    regular file within the data-file bound, decompressed size included.

    Parameters
    ----------
    path : str or Path, optional
        A text file; the bundled Tiny Shakespeare when omitted.
    key : str
        The config key or flag that named ``path`` (for the error message).

    Raises
    ------
    hpcbench.runtime.bounded.InputFileError
        ``path`` is missing, not a regular file, beyond its bound, or unreadable (an input error: exit 2).
    """
    if path is None:
        return _bundled()
    from hpcbench.runtime.bounded import read_input

    return read_input(path, key, "data", "Shakespeare text").decode("utf-8")


def vocabulary(text: str) -> list[str]:
    """The text's distinct characters, sorted (index = class); 65 for the bundled text."""
    return sorted(set(text))


def encode(text: str, vocab: list[str]) -> np.ndarray:
    """Each character's index in ``vocab`` (which must hold every character of ``text``), int64 shape ``(len,)``."""
    lut = np.zeros(max(map(ord, vocab)) + 1, dtype=np.int64)
    lut[[ord(c) for c in vocab]] = np.arange(len(vocab))
    return lut[np.frombuffer(text.encode("utf-32-le"), dtype=np.uint32)]

"""Data files bundled with :mod:`hpcbench` (real device traces, text corpus).

See ``ATTRIBUTION.md`` in this directory for sources, units and licences.
"""

from __future__ import annotations

import pathlib

__all__ = ["DATA_DIR", "data_path"]

#: Directory holding the bundled data files.
DATA_DIR = pathlib.Path(__file__).resolve().parent


def data_path(*parts: str) -> pathlib.Path:
    """Path of a bundled data file.

    Parameters
    ----------
    *parts : str
        Path components relative to the data directory, e.g.
        ``data_path("traces", "flash_availability.json.gz")``.

    Returns
    -------
    pathlib.Path
        Absolute path (the file is not required to exist).

    Raises
    ------
    ValueError
        If the components would escape the data directory.
    """
    path = DATA_DIR.joinpath(*parts).resolve()
    if path != DATA_DIR and DATA_DIR not in path.parents:
        raise ValueError(f"data_path{parts!r} escapes the bundled data directory")
    return path

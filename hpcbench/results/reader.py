"""Read hpcbench HDF5 result files (used by analysis scripts; no MPI)."""

from __future__ import annotations

import json
import time
from contextlib import contextmanager
from typing import Callable, Iterator, TypeVar

import h5py
import numpy as np

from hpcbench.runtime.errors import InputError

__all__ = ["read_table", "read_attrs", "open_file", "read_consistent", "table_units", "table_columns", "checked"]

T = TypeVar("T")


def checked(path, key: str = "results file"):
    """``path`` once it is a regular file within the results bound (:func:`hpcbench.runtime.bounded.check_input_file`).

    Every path this module opens passes here first: a FIFO, a device or an
    oversized file is an :class:`~hpcbench.runtime.errors.InputError` naming
    ``key`` and the path, before HDF5 opens (and blocks on, or reads) it.
    """
    from hpcbench.runtime.bounded import check_input_file

    return check_input_file(path, key, "results", "HDF5 file")


def read_table(path_or_file, name: str) -> dict[str, np.ndarray]:
    """Columns of table ``name`` as a dict of 1-D arrays (strings decoded).

    A column an older run wrote under a since-renamed name is returned under
    today's name (:data:`hpcbench.runtime.renamed.RENAMED_COLUMNS`), so
    files from before and after a rename read alike.

    Parameters
    ----------
    path_or_file : str, pathlib.Path or h5py.File
        The result file.
    name : str
        Table (group) name, e.g. ``"rounds"``.

    Raises
    ------
    KeyError
        If the file has no such table.
    """
    if isinstance(path_or_file, h5py.File):
        return _read(path_or_file, name)
    with h5py.File(checked(path_or_file), "r") as h5:
        return _read(h5, name)


def _read(h5: h5py.File, name: str) -> dict[str, np.ndarray]:
    if name not in h5:
        raise KeyError(f"{h5.filename}: no table {name!r} (has {sorted(h5.keys())})")
    out = {}
    for col, ds in _columns(h5[name]):
        if h5py.check_string_dtype(ds.dtype) is not None:
            out[col] = np.array(ds.asstr()[()], dtype=object)
        else:
            out[col] = ds[()]
    return out


def _columns(group: h5py.Group) -> list[tuple[str, h5py.Dataset]]:
    """``(today's name, dataset)`` of every column of a table group, in column order (the one place that
    maps a renamed column's stored name, :func:`hpcbench.runtime.renamed.column_name`)."""
    from hpcbench.runtime.renamed import column_name

    return [(column_name(col), group[col]) for col in json.loads(group.attrs["columns"])]


def read_attrs(path_or_file) -> dict:
    """Root attributes of a result file (a path or an open ``h5py.File``), with ``config`` parsed from JSON.

    Raises
    ------
    OSError
        The file cannot be read as HDF5.
    ValueError
        Its ``config_json`` is not JSON (or is nested too deeply to parse).
    """
    if isinstance(path_or_file, h5py.File):
        attrs = {k: (v.item() if isinstance(v, np.generic) else v) for k, v in path_or_file.attrs.items()}
    else:
        with open_file(path_or_file) as h5:
            attrs = {k: (v.item() if isinstance(v, np.generic) else v) for k, v in h5.attrs.items()}
    if "config_json" in attrs:
        try:
            attrs["config"] = json.loads(attrs["config_json"])
        except RecursionError:
            raise ValueError(f"{getattr(path_or_file, 'filename', path_or_file)}: config_json is nested too deeply") from None
    return attrs


@contextmanager
def open_file(path) -> Iterator[h5py.File]:
    """Open a result file for reading, also while a run writes it: ``with open_file(path) as h5: ...``.

    Opened without HDF5's file lock (the writer holds it), inside the read
    side of the file's write window (:func:`hpcbench.runtime.outputs.read_window`):
    a running job's writer waits while the block reads, so the block sees
    the file as of the writer's last flush, never half of an append. Keep
    the block short: the writer waits for it. A file whose writer does not
    take the window (an older hpcbench) may still be caught mid-write; its
    read then fails with an OSError or KeyError, to be retried
    (:func:`read_consistent`).
    """
    from hpcbench.runtime.outputs import read_window

    path = checked(path)
    with read_window(path):
        with h5py.File(path, "r", locking=False) as h5:
            yield h5


def read_consistent(path, read: Callable[[h5py.File], T], attempts: int = 5, pause_s: float = 0.05) -> T:
    """``read(h5)`` inside :func:`open_file`, tried again when it fails the way a file caught mid-write fails.

    Raises
    ------
    OSError, KeyError, ValueError
        The last attempt's error (the file is not HDF5, or lacks what ``read`` needs).
    """
    for attempt in range(attempts):
        try:
            with open_file(path) as h5:
                return read(h5)
        except InputError:          # not a regular file within its bound: no retry can change that
            raise
        except (OSError, KeyError, ValueError, RuntimeError):
            if attempt == attempts - 1:
                raise
            time.sleep(pause_s * (attempt + 1))
    raise AssertionError("unreachable")  # pragma: no cover


def table_units(path_or_file, name: str) -> dict[str, str]:
    """``units`` attribute of every column of table ``name`` (column order, today's column names).

    Raises
    ------
    KeyError
        If the file has no such table.
    """
    return {col: units for col, (units, _) in table_columns(path_or_file, name).items()}


def table_columns(path_or_file, name: str) -> dict[str, tuple[str, str]]:
    """``(units, description)`` of every column of table ``name`` (column order, today's column names).

    Raises
    ------
    KeyError
        If the file has no such table.
    """
    if not isinstance(path_or_file, h5py.File):
        with h5py.File(checked(path_or_file), "r") as h5:
            return table_columns(h5, name)
    if name not in path_or_file:
        raise KeyError(f"{path_or_file.filename}: no table {name!r}")
    return {col: (str(ds.attrs.get("units", "")), str(ds.attrs.get("description", "")))
            for col, ds in _columns(path_or_file[name])}

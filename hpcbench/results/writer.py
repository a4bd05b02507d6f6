"""Write one HDF5 file per run: provenance attributes plus append-only tables.

A table is an HDF5 group whose columns are 1-D chunked, resizable datasets of
equal length, each with a ``units`` and a ``description`` attribute. Rows are
appended and the file is flushed after every append, so a run killed with
SIGKILL leaves a readable file holding every completed append.

Only one process (rank 0) ever opens the file; this module does not import MPI.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping, Sequence

import h5py
import numpy as np

__all__ = ["Column", "Table", "ResultsFile", "SCHEMA_VERSION"]

SCHEMA_VERSION = 1
_CHUNK_ROWS = 256


@dataclass(frozen=True)
class Column:
    """One column of a result table.

    Parameters
    ----------
    name : str
        Dataset name inside the table group.
    dtype : str or numpy.dtype
        Element type (``"str"`` for variable-length UTF-8 strings).
    units : str
        Physical unit (``"s"``, ``"B"``, ``"GB/s"``, ``"1"`` for dimensionless).
    description : str
        One sentence on what the column holds.
    """

    name: str
    dtype: Any
    units: str
    description: str = ""

    def h5_dtype(self):
        """The HDF5 dtype of the column."""
        if self.dtype in ("str", str):
            return h5py.string_dtype("utf-8")
        return np.dtype(self.dtype)


class Table:
    """Append-only table stored as an HDF5 group of equal-length columns."""

    def __init__(self, owner: "ResultsFile", group: h5py.Group, columns: Sequence[Column]):
        self._owner = owner
        self._group = group
        self._columns = {c.name: c for c in columns}
        self._datasets: dict[str, h5py.Dataset] = {}
        self._rows = 0

    @property
    def rows(self) -> int:
        """Number of rows written so far."""
        return self._rows

    def append(self, rows: Mapping[str, Any], flush: bool = True) -> None:
        """Append rows and flush the file.

        Parameters
        ----------
        rows : mapping of str to array_like
            One equal-length 1-D array (or scalar, for a single row) per column;
            every column of the table must be present and no other.
        flush : bool, default True
            Flush the file afterwards. Pass False when appending to several
            tables at once and call :meth:`ResultsFile.flush` after the last.

        Raises
        ------
        KeyError
            If a column is missing or unknown.
        ValueError
            If the arrays differ in length.
        """
        missing = set(self._columns) - set(rows)
        extra = set(rows) - set(self._columns)
        if missing or extra:
            raise KeyError(f"table {self._group.name!r}: missing columns {sorted(missing)}, "
                           f"unknown columns {sorted(extra)}")
        arrays = {}
        for name, value in rows.items():
            col = self._columns[name]
            if col.dtype in ("str", str):
                arr = np.asarray(value, dtype=object).reshape(-1)
            else:
                arr = np.asarray(value, dtype=col.h5_dtype()).reshape(-1)
            arrays[name] = arr
        lengths = {len(a) for a in arrays.values()}
        if len(lengths) != 1:
            raise ValueError(f"table {self._group.name!r}: columns differ in length {sorted(lengths)}")
        n = lengths.pop()
        if n == 0:
            return
        for name, arr in arrays.items():
            ds = self._datasets.get(name)
            if ds is None:
                ds = self._datasets[name] = self._group[name]
            ds.resize((self._rows + n,))
            ds[self._rows:self._rows + n] = arr
        self._rows += n
        self._group.attrs["rows"] = self._rows
        if flush:
            self._owner.flush()
        self._owner._observe(self._group.name.lstrip("/"), arrays)

    def truncate(self, rows: int) -> None:
        """Keep only the first ``rows`` rows (what a resumed run continues from) and flush.

        Raises
        ------
        ValueError
            If ``rows`` is negative or more than the table holds.
        """
        if not 0 <= rows <= self._rows:
            raise ValueError(f"table {self._group.name!r}: cannot keep {rows} of its {self._rows} rows")
        for name in self._columns:
            self._group[name].resize((rows,))
        self._rows = rows
        self._group.attrs["rows"] = rows
        self._owner.flush()


class ResultsFile:
    """One run's HDF5 result file, opened by a single process.

    Observers (:meth:`observe`) see every appended row as it is written:
    what ``--tensorboard`` streams the live scalars through.

    Parameters
    ----------
    path : str or pathlib.Path
        Output file; parent folders are created.
    kind : str
        What produced it (``"fl"``, ``"collectives"``, ``"compress"``...).
    config : mapping
        The run's full configuration; stored as YAML and JSON strings.
    attrs : mapping, optional
        Provenance attributes (see :func:`hpcbench.runtime.provenance.collect`).
    overwrite : bool, default False
        Replace an existing file. Without it an existing file is never touched.

    Raises
    ------
    FileExistsError
        ``path`` exists and ``overwrite`` is False.
    OSError
        The file cannot be created.

    Notes
    -----
    Root attributes ``status`` (``"running"``, ``"completed"`` or ``"failed"``)
    and ``end_time`` are set by :meth:`close`. Use it as a context manager: an
    exception inside the block marks the file ``"failed"`` with the error text.
    """

    def __init__(self, path, kind: str, config: Mapping[str, Any],
                 attrs: Mapping[str, Any] | None = None, overwrite: bool = False) -> None:
        import yaml

        self.path = Path(path)
        self._observers: list = []
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._h5 = h5py.File(self.path, "w" if overwrite else "x")
        root = self._h5.attrs
        root["schema_version"] = SCHEMA_VERSION
        root["kind"] = kind
        root["config_yaml"] = yaml.safe_dump(_plain(config), sort_keys=False)
        root["config_json"] = json.dumps(_plain(config), sort_keys=True)
        root["status"] = "running"
        for key, value in (attrs or {}).items():
            root[key] = _attr(value)
        self.flush()

    @classmethod
    def reopen(cls, path, kind: str, config: Mapping[str, Any],
               attrs: Mapping[str, Any] | None = None) -> "ResultsFile":
        """Open an existing results file to append to it (a resumed run).

        Its ``status`` becomes ``"running"`` again, its config attributes are
        replaced by ``config`` and ``attrs`` are set; tables are reached with
        :meth:`table`, which then returns the existing table (to be truncated
        to the resumed position with :meth:`Table.truncate`).

        Raises
        ------
        FileNotFoundError
            ``path`` does not exist.
        ValueError
            The file is not a results file of this ``kind``.
        OSError
            The file cannot be opened for writing.
        """
        import yaml

        self = cls.__new__(cls)
        self.path = Path(path)
        self._observers = []
        if not self.path.is_file():
            raise FileNotFoundError(f"no results file {str(self.path)!r}")
        self._h5 = h5py.File(self.path, "r+")
        root = self._h5.attrs
        if root.get("kind") != kind or "schema_version" not in root:
            found = root.get("kind")
            self._h5.close()
            raise ValueError(f"{str(self.path)!r} is not a {kind!r} results file (kind {found!r})")
        root["config_yaml"] = yaml.safe_dump(_plain(config), sort_keys=False)
        root["config_json"] = json.dumps(_plain(config), sort_keys=True)
        root["status"] = "running"
        for key in ("end_time", "error"):
            if key in root:
                del root[key]
        for key, value in (attrs or {}).items():
            root[key] = _attr(value)
        self.flush()
        return self

    def remove(self, name: str) -> None:
        """Delete dataset or group ``name``, or else root attribute ``name``, if present.

        What a resumed run writes again at its end, or only when it happens.
        """
        if name in self._h5:
            del self._h5[name]
        elif name in self._h5.attrs:
            del self._h5.attrs[name]
        self.flush()

    def __enter__(self) -> "ResultsFile":
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        if exc_type is None:
            self.close("completed")
        else:
            self.close("failed", error=f"{exc_type.__name__}: {exc}")

    def table(self, name: str, columns: Sequence[Column], description: str = "") -> Table:
        """Create an empty table ``name`` with the given columns, or return it if the file holds it.

        Raises
        ------
        ValueError
            An existing table ``name`` has other columns.
        """
        if name in self._h5:
            group = self._h5[name]
            found = json.loads(group.attrs.get("columns", "[]"))
            if found != [c.name for c in columns]:
                raise ValueError(f"table {name!r} of {str(self.path)!r} has columns {found}, "
                                 f"expected {[c.name for c in columns]}")
            table = Table(self, group, columns)
            table._rows = int(group.attrs["rows"])
            return table
        group = self._h5.create_group(name)
        group.attrs["description"] = description
        group.attrs["columns"] = json.dumps([c.name for c in columns])
        group.attrs["rows"] = 0
        for col in columns:
            ds = group.create_dataset(col.name, shape=(0,), maxshape=(None,), dtype=col.h5_dtype(),
                                      chunks=(_CHUNK_ROWS,))
            ds.attrs["units"] = col.units
            ds.attrs["description"] = col.description
        self.flush()
        return Table(self, group, columns)

    def observe(self, observer) -> None:
        """Call ``observer.append(table, rows)`` after every append and ``observer.close()`` at :meth:`close`.

        ``table`` is the table's name, ``rows`` a dict of the appended 1-D
        arrays (one per column). An observer that raises is dropped with one
        warning on stderr: results come first.
        """
        self._observers.append(observer)

    def _observe(self, table: str, rows: Mapping[str, np.ndarray]) -> None:
        for observer in list(self._observers):
            try:
                observer.append(table, rows)
            except Exception as exc:  # noqa: BLE001 - a scalar log never ends a run
                self._drop(observer, exc)

    def _drop(self, observer, exc: Exception) -> None:
        import sys

        self._observers.remove(observer)
        sys.stderr.write(f"warning: {type(observer).__name__} stopped: {type(exc).__name__}: {exc}\n")

    def write_array(self, name: str, data, units: str, description: str = "") -> None:
        """Write a whole (n-dimensional) dataset at once, with its units."""
        ds = self._h5.create_dataset(name, data=np.asarray(data))
        ds.attrs["units"] = units
        ds.attrs["description"] = description
        self.flush()

    def get_attr(self, name: str, default: Any = None) -> Any:
        """Root attribute ``name`` (``default`` when absent)."""
        value = self._h5.attrs.get(name, default)
        return value.item() if isinstance(value, np.generic) else value

    def set_attrs(self, **attrs: Any) -> None:
        """Set root attributes (e.g. summary figures) and flush."""
        for key, value in attrs.items():
            self._h5.attrs[key] = _attr(value)
        self.flush()

    def flush(self) -> None:
        """Push everything written so far to disk."""
        self._h5.flush()

    def close(self, status: str = "completed", error: str = "") -> None:
        """Record the end time and status, then close the file."""
        from datetime import datetime, timezone

        if not self._h5.id.valid:
            return
        for observer in list(self._observers):
            try:
                observer.close()
            except Exception as exc:  # noqa: BLE001
                self._drop(observer, exc)
        self._observers.clear()
        self._h5.attrs["status"] = status
        self._h5.attrs["end_time"] = datetime.now(timezone.utc).replace(microsecond=0).isoformat()
        if error:
            self._h5.attrs["error"] = error
        self._h5.close()


def _attr(value):
    """An HDF5-storable attribute value (str subclasses such as torch's version become str)."""
    if isinstance(value, str):
        return str(value)
    return value


def _plain(obj):
    """Config as plain YAML/JSON types (paths and tuples become str and list)."""
    if isinstance(obj, Mapping):
        return {str(k): _plain(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_plain(v) for v in obj]
    if isinstance(obj, (str, int, float, bool)) or obj is None:
        return obj
    if isinstance(obj, np.generic):
        return obj.item()
    return str(obj)

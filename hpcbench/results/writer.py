"""Write one HDF5 file per run: provenance attributes plus append-only tables.

A table is an HDF5 group whose columns are 1-D chunked, resizable datasets of
equal length, each with a ``units`` and a ``description`` attribute. Rows are
appended and the file is flushed after every append, so a run killed with
SIGKILL leaves a readable file holding every completed append.

Only one process (rank 0) ever opens the file; this module does not import MPI.
Within that process a lock makes every write (an append with its row count,
a heartbeat, marking the file failed from the lifecycle's failure listener)
atomic with respect to the others, so a flush never lands between a column's
resize and its data. Across processes the file's output lock
(:class:`hpcbench.runtime.outputs.OutputLock`, ``.NAME.lock`` beside it)
keeps a second run from opening it, and every write with its flush is one
write window, so readers (:func:`hpcbench.results.reader.open_file`) see the
file as of a flush, never in the middle of an append.

A new file is created in place (a killed run leaves a readable file marked
``running``); replacing an existing file (``overwrite``) writes the new one
beside it (``.NAME.XXXX.tmp``) and renames it over the old one only when
the run ends (:meth:`ResultsFile.close`, or :meth:`ResultsFile.mark_failed`),
so the old file is never truncated and survives a killed run whole.
"""

from __future__ import annotations

import errno
import json
import os
import socket
import threading
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping, Sequence

import h5py
import numpy as np

__all__ = ["Column", "Table", "ResultsFile", "SCHEMA_VERSION", "HEARTBEAT_S"]

SCHEMA_VERSION = 1
_CHUNK_ROWS = 256
#: seconds between two ``heartbeat`` writes of a running file (:meth:`ResultsFile.start_heartbeat`)
HEARTBEAT_S = 10.0


def _utc_now() -> str:
    from datetime import datetime, timezone

    return datetime.now(timezone.utc).replace(microsecond=0).isoformat()


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
        with self._owner._writing():
            self._append(rows, flush)

    def _append(self, rows: Mapping[str, Any], flush: bool) -> None:
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
        with self._owner._writing():
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
        Replace an existing file. Without it an existing file is never
        touched; with it the old file is replaced when this one is closed
        (or marked failed), never truncated in place.
    lock : hpcbench.runtime.outputs.OutputLock, optional
        The output lock the caller holds for ``path`` (the lifecycle locks
        every output of a run together); without one the file takes its own
        and releases it at :meth:`close`.

    Raises
    ------
    FileExistsError
        ``path`` exists and ``overwrite`` is False.
    hpcbench.runtime.errors.InputError
        Another live process holds ``path`` (its output lock).
    OSError
        The file cannot be created.

    Notes
    -----
    Root attributes ``status`` (``"running"``, ``"completed"`` or ``"failed"``)
    and ``end_time`` are set by :meth:`close`. Use it as a context manager: an
    exception inside the block marks the file ``"failed"`` with the error text.
    ``writer_host`` and ``writer_pid`` name the process writing the file, and
    ``heartbeat`` (UTC, ISO 8601) is refreshed every :data:`HEARTBEAT_S`
    seconds once :meth:`start_heartbeat` is called, so that a file a kill left
    ``running`` can be told from a live run (:func:`hpcbench.results.status.file_status`).
    A file marked failed (:meth:`mark_failed`) stays failed whatever
    :meth:`close` is later asked to record.
    """

    def __init__(self, path, kind: str, config: Mapping[str, Any],
                 attrs: Mapping[str, Any] | None = None, overwrite: bool = False, lock=None) -> None:
        import yaml

        self.path = Path(path)
        self._init_state()
        self.path.parent.mkdir(parents=True, exist_ok=True)
        if not overwrite and (self.path.exists() or self.path.is_symlink()):
            raise FileExistsError(errno.EEXIST, "file exists", str(self.path))
        self._take_lock(lock, "output", dict(attrs or {}).get("run_id", ""))
        try:
            with self._writing():
                exists = self.path.exists() or self.path.is_symlink()
                if exists and not overwrite:  # created since the check above
                    raise FileExistsError(errno.EEXIST, "file exists", str(self.path))
                if exists:  # the replacement is renamed over it at the end
                    from hpcbench.runtime.outputs import temp_beside

                    self._file = temp_beside(self.path)
                    self._h5 = h5py.File(self._file, "w")
                else:
                    self._h5 = h5py.File(self.path, "x")
                root = self._h5.attrs
                root["schema_version"] = SCHEMA_VERSION
                root["kind"] = kind
                root["config_yaml"] = yaml.safe_dump(_plain(config), sort_keys=False)
                root["config_json"] = json.dumps(_plain(config), sort_keys=True)
                root["status"] = "running"
                self._start_writing(attrs, ())
        except BaseException:
            self._abandon()
            raise

    def _init_state(self) -> None:
        self._lock = threading.RLock()
        self._failed = ""
        self._beat_stop = threading.Event()
        self._beat: threading.Thread | None = None
        self._observers: list = []
        self._guard = None        # the output lock (hpcbench.runtime.outputs.OutputLock)
        self._own_guard = False   # taken here (released at close) rather than handed in by the lifecycle
        self._file = self.path    # the file being written: self.path, or a replacement beside it
        self._h5 = None

    def _take_lock(self, lock, key: str, run_id: str) -> None:
        from hpcbench.runtime.outputs import OutputLock

        if lock is None:
            lock, self._own_guard = OutputLock.acquire(self.path, key, run_id), True
        self._guard = lock

    @contextmanager
    def _writing(self):
        """This thread's write, with its flush, as one write window for readers in other processes.

        HDF5's failed writes (h5py raises RuntimeError) come out as the
        OSError of their ``errno`` (ENOSPC, EIO...), naming the file.
        """
        with self._lock:
            try:
                if self._guard is None:
                    yield
                    return
                with self._guard.writing():
                    yield
            except RuntimeError as exc:
                code = _errno_of(str(exc))
                if code is None:
                    raise
                raise OSError(code, f"cannot write {str(self.path)!r}: {os.strerror(code)}") from None

    def _abandon(self) -> None:
        """Undo a creation that failed: close, remove a replacement never published, drop an own lock."""
        try:
            if self._h5 is not None and self._h5.id.valid:
                self._h5.close()
        except Exception:  # noqa: BLE001 - cleaning up after the real error
            pass
        if self._file != self.path:
            try:
                os.unlink(self._file)
            except OSError:
                pass
        if self._own_guard and self._guard is not None:
            self._guard.release()

    def _publish(self) -> None:
        """Rename a replacement over the file it replaces (once; the open handle follows the rename)."""
        if self._file == self.path:
            return
        os.replace(self._file, self.path)
        self._file = self.path
        try:
            fd = os.open(self.path.parent, os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
        except OSError:
            pass

    def _start_writing(self, attrs: Mapping[str, Any] | None, keep: Sequence[str]) -> None:
        """Set ``attrs`` (but ``keep``: the file's own), name this process as the writer, flush."""
        for key, value in (attrs or {}).items():
            if key not in keep:
                self._h5.attrs[key] = _attr(value)
        self._mark_writer()
        self.flush()

    def _mark_writer(self) -> None:
        root = self._h5.attrs
        root["writer_host"] = socket.gethostname()
        root["writer_pid"] = os.getpid()
        root["heartbeat"] = _utc_now()

    @property
    def run_id(self) -> str:
        """The ``run_id`` root attribute ("" for a file without one)."""
        with self._lock:
            value = self._h5.attrs.get("run_id", "")
        return value.decode() if isinstance(value, bytes) else str(value)

    @classmethod
    def reopen(cls, path, kind: str, config: Mapping[str, Any],
               attrs: Mapping[str, Any] | None = None, lock=None) -> "ResultsFile":
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
        self._init_state()
        if not self.path.is_file():
            raise FileNotFoundError(f"no results file {str(self.path)!r}")
        self._take_lock(lock, "output", dict(attrs or {}).get("run_id", ""))
        try:
            with self._writing():
                self._h5 = h5py.File(self.path, "r+")
                root = self._h5.attrs
                if root.get("kind") != kind or "schema_version" not in root:
                    found = root.get("kind")
                    raise ValueError(f"{str(self.path)!r} is not a {kind!r} results file (kind {found!r})")
                root["config_yaml"] = yaml.safe_dump(_plain(config), sort_keys=False)
                root["config_json"] = json.dumps(_plain(config), sort_keys=True)
                root["status"] = "running"
                for key in ("end_time", "error"):
                    if key in root:
                        del root[key]
                self._start_writing(attrs, ("run_id",))
        except BaseException:
            self._abandon()
            raise
        return self

    def remove(self, name: str) -> None:
        """Delete dataset or group ``name``, or else root attribute ``name``, if present.

        What a resumed run writes again at its end, or only when it happens.
        """
        with self._writing():
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
        with self._writing():
            return self._table(name, columns, description)

    def _table(self, name: str, columns: Sequence[Column], description: str) -> Table:
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
        with self._writing():
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
        with self._writing():
            for key, value in attrs.items():
                self._h5.attrs[key] = _attr(value)
            self.flush()

    def flush(self) -> None:
        """Push everything written so far to disk."""
        with self._writing():
            self._h5.flush()

    # -- liveness and failure -------------------------------------------------------------
    def start_heartbeat(self, interval_s: float = HEARTBEAT_S) -> None:
        """Refresh the ``heartbeat`` attribute every ``interval_s`` seconds from a daemon thread until :meth:`close`.

        A heartbeat that cannot be written (a full disk) stops with one
        warning; the next append or :meth:`close` meets the same error and
        the run fails with it.
        """
        if self._beat is not None:
            return

        def beat():
            while not self._beat_stop.wait(interval_s):
                try:
                    with self._writing():
                        if self._h5 is None or not self._h5.id.valid:
                            return
                        self._h5.attrs["heartbeat"] = _utc_now()
                        self._h5.flush()
                except Exception as exc:  # noqa: BLE001 - never a traceback from a daemon thread
                    import sys

                    sys.stderr.write(f"warning: {self.path}: heartbeat stopped: {type(exc).__name__}: {exc}\n")
                    return

        self._beat = threading.Thread(target=beat, name="hpcbench-heartbeat", daemon=True)
        self._beat.start()

    def _record_failure(self, error: str, exc: BaseException) -> None:
        """The file could not take ``failed``: keep the reason in its lock file, where ``results`` looks next."""
        if self._guard is not None:
            self._guard.record_failure(f"{error}; the results file could not record it: "
                                       f"{type(exc).__name__}: {exc}"[:3000])

    def mark_failed(self, error: str) -> None:
        """Record ``status = "failed"`` and ``error`` now and flush, leaving the file open.

        What the lifecycle does when another rank reports a failure, before
        the job is aborted; a later :meth:`close` keeps ``failed``. Safe from
        any thread; does nothing once the file is closed; never raises. A
        replacement of an existing file (``overwrite``) is renamed over it
        now, since the abort that follows ends the process. When the file
        cannot be written (a full disk, an I/O error) the failure is kept in
        its lock file instead (:func:`hpcbench.results.status.file_status`
        reads it).
        """
        with self._writing():
            if self._h5 is None or not self._h5.id.valid:
                return
            self._failed = error or "failed"
            try:
                self._h5.attrs["status"] = "failed"
                self._h5.attrs["error"] = self._failed
                self._h5.attrs["end_time"] = _utc_now()
                self._h5.flush()
            except Exception as exc:  # noqa: BLE001 - the abort matters more
                self._record_failure(self._failed, exc)
            try:
                self._publish()
            except OSError:
                pass

    def close(self, status: str = "completed", error: str = "") -> None:
        """Record the end time and status, close the file and release its lock (a file marked failed stays failed).

        A replacement of an existing file is renamed over it here.

        Raises
        ------
        OSError
            The file could not be written or closed (a full disk, an I/O
            error) while ``status`` was ``"completed"``: the run did not end
            well after all. The failure is then recorded as in
            :meth:`mark_failed` (in the file if it still takes it, else in
            its lock file).
        """
        self._beat_stop.set()
        problem = None
        with self._writing():
            if self._h5 is None or not self._h5.id.valid:
                return
            for observer in list(self._observers):
                try:
                    observer.close()
                except Exception as exc:  # noqa: BLE001 - a scalar log never ends a run
                    self._drop(observer, exc)
            self._observers.clear()
            if self._failed:
                status, error = "failed", self._failed if not error else f"{self._failed}; {error}"
            try:
                self._h5.attrs["status"] = status
                self._h5.attrs["end_time"] = _utc_now()
                self._h5.attrs["heartbeat"] = self._h5.attrs["end_time"]
                if error:
                    self._h5.attrs["error"] = error
                self._h5.flush()
            except Exception as exc:  # noqa: BLE001 - a full disk: record it where it fits
                problem = exc
            try:
                self._h5.close()
            except Exception as exc:  # noqa: BLE001
                problem = problem or exc
            if problem is not None:
                why = error or f"{type(problem).__name__}: {problem}"
                if status != "failed":
                    why = f"the results file could not be completed: {type(problem).__name__}: {problem}"
                self._record_failure(why, problem)
            try:
                self._publish()
            except OSError as exc:
                problem = problem or exc
        if self._own_guard and self._guard is not None:
            self._guard.release()
        if problem is not None and status != "failed":
            raise problem

    def release_lock(self) -> None:
        """Release the output lock this file took itself (the lifecycle releases the locks it handed in)."""
        if self._guard is not None:
            self._guard.release()


def _errno_of(message: str) -> int | None:
    """The ``errno = N`` an HDF5 write error names, if any."""
    import re

    found = re.search(r"errno = (\d+)", message)
    return int(found.group(1)) if found else None


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

"""TensorBoard scalars of a run: live while it runs (``--tensorboard DIR``) and from a finished file.

Both paths go through :func:`scalars`, so a run watched live and the same
file exported afterwards (``hpcbench results tensorboard RUN.h5 DIR``) give
the same series. Every run is one TensorBoard run: the event files go to
``DIR/<results file stem>/``, so ``tensorboard --logdir DIR`` (FedScale's
``--logdir`` workflow) shows runs side by side. Rank 0 writes them: it is the
process that holds the results file, and the scalars are the rows it appends
(:meth:`hpcbench.results.ResultsFile.observe`).

Which columns become scalars is declared per runner kind and table in
:data:`SCALAR_TABLES`: the step column (round, step, iteration, message size),
the string columns that split a column into series (one tag per
synchroniser, implementation, allocator) and the value columns (accuracy,
loss, virtual time, throughput, busbw...). NaN values (rounds that were not
evaluated) are left out. The run's config is written once as text
(``config``). ``tensorboard`` is an optional extra (``pip install -e
'.[tensorboard]'``); only its event-file writer is used (no TensorFlow, no
torch).
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator, Mapping, NamedTuple

import numpy as np

from hpcbench.runtime.errors import InputError

__all__ = ["ScalarSpec", "SCALAR_TABLES", "Scalar", "scalars", "require_tensorboard", "ScalarLog", "TensorBoardObserver",
           "attach", "export", "run_logdir"]


@dataclass(frozen=True)
class ScalarSpec:
    """How one results table becomes TensorBoard series.

    Attributes
    ----------
    step : str or None
        Integer column giving each row's step; None: the row's number in the table.
    groups : tuple of str
        Columns whose values (``:g`` for numbers) are appended to the tag, one
        series per combination (``results/busbw/ring``).
    values : tuple of str
        Columns written as scalars, tag ``TABLE/COLUMN[/GROUP...]``; columns a
        file lacks (an older version, the other FL mode) are skipped.
    """

    step: str | None
    groups: tuple[str, ...]
    values: tuple[str, ...]


_FL_ROUND = ("test_accuracy", "test_loss", "train_loss", "virtual_time_s", "round_duration_s", "round_wall_s",
             "wall_time_s", "participants", "stragglers", "dropouts", "learning_rate", "buffered",
             "mean_staleness", "in_flight")

#: (runner kind, table) -> what it writes; a table not named here writes nothing
SCALAR_TABLES: dict[tuple[str, str], ScalarSpec] = {
    ("fl", "rounds"): ScalarSpec("round", (), _FL_ROUND),
    ("train", "steps"): ScalarSpec("step", ("sync", "variant"),
                                   ("loss", "step_s", "samples_per_s_worker", "samples_per_s_total", "compute_s",
                                    "comm_span_s", "comm_exposed_s", "hidden_fraction")),
    ("train", "iterations"): ScalarSpec("iteration", ("sync", "variant"), ("img_per_s_worker", "accuracy")),
    ("train", "summary"): ScalarSpec(None, ("sync", "variant"),
                                     ("img_per_s_worker", "img_per_s_total", "efficiency", "predicted_efficiency",
                                      "monitor_overhead", "final_accuracy")),
    ("pipeline", "iterations"): ScalarSpec("iteration", ("allocator",), ("time_s", "loss", "bubble_fraction")),
    ("pipeline", "allocations"): ScalarSpec(None, ("allocator",),
                                            ("predicted_iteration_s", "measured_iteration_s", "solve_s")),
    ("collectives", "results"): ScalarSpec("size", ("impl",), ("busbw", "algbw", "time", "p50", "p99", "vs_mpi")),
    ("collectives", "overlap"): ScalarSpec("size", ("transport",), ("hidden", "t_comm", "t_compute", "t_overlap")),
    ("compress", "local"): ScalarSpec("size_bytes", ("compressor",),
                                      ("compress_s", "decompress_s", "throughput", "recall")),
    ("compress", "allreduce"): ScalarSpec("size_bytes", ("compressor", "output", "link"),
                                          ("time", "dense_time", "speedup", "wire_bytes")),
    ("compress", "convergence"): ScalarSpec(None, ("compressor",), ("final_loss", "test_accuracy")),
    ("costmodel", "results"): ScalarSpec("size", ("algorithm", "link", "alpha"), ("measured", "predicted", "ratio")),
}


class Scalar(NamedTuple):
    """One TensorBoard scalar: ``tag``, finite ``value``, integer ``step``, and the ``row`` it came from."""

    tag: str
    value: float
    step: int
    row: int


def _label(value) -> str:
    if isinstance(value, (float, np.floating)):
        return f"{float(value):g}"
    if isinstance(value, bytes):
        return value.decode()
    return str(value)


def scalars(kind: str, table: str, rows: Mapping[str, np.ndarray], first_row: int = 0) -> Iterator[Scalar]:
    """The scalars of appended rows of one table.

    Parameters
    ----------
    kind : str
        The results file's ``kind`` (``"fl"``, ``"train"``...).
    table : str
        Table name.
    rows : mapping of str to ndarray of shape (n,)
        The appended rows, one array per column.
    first_row : int
        Number of rows the table held before these (the step where the
        table has no step column).

    Yields
    ------
    Scalar
        Finite values only; ``row`` indexes ``rows``.
    """
    spec = SCALAR_TABLES.get((kind, table))
    if spec is None or not rows:
        return
    n = len(next(iter(rows.values())))
    steps = (np.asarray(rows[spec.step], dtype=np.int64) if spec.step in rows
             else np.arange(first_row, first_row + n, dtype=np.int64))
    groups = [g for g in spec.groups if g in rows]
    for i in range(n):
        suffix = "".join("/" + _label(rows[g][i]) for g in groups)
        for column in spec.values:
            if column not in rows:
                continue
            value = float(rows[column][i])
            if math.isfinite(value):
                yield Scalar(f"{table}/{column}{suffix}", value, int(steps[i]), i)


def require_tensorboard(key: str = "--tensorboard") -> None:
    """Check that the optional ``tensorboard`` package can be imported.

    Raises
    ------
    InputError
        It cannot; the message names ``key`` and the extra to install.
    """
    import importlib.util

    if importlib.util.find_spec("tensorboard") is None:
        raise InputError(f"{key}: needs the tensorboard package: pip install -e '.[tensorboard]' "
                         f"(or pip install tensorboard)")


class ScalarLog:
    """One TensorBoard run directory: scalars and text as event files.

    Parameters
    ----------
    logdir : str or pathlib.Path
        The run's directory (created).

    Raises
    ------
    InputError
        ``tensorboard`` is not installed.
    """

    def __init__(self, logdir) -> None:
        require_tensorboard()
        from tensorboard.summary.writer.event_file_writer import EventFileWriter

        self.logdir = Path(logdir)
        self.logdir.mkdir(parents=True, exist_ok=True)
        self._writer = EventFileWriter(str(self.logdir))

    def scalar(self, tag: str, value: float, step: int, wall_time: float | None = None) -> None:
        """Add one scalar (TensorBoard's scalar dashboard; ``simple_value``)."""
        from tensorboard.compat.proto.event_pb2 import Event
        from tensorboard.compat.proto.summary_pb2 import Summary

        summary = Summary(value=[Summary.Value(tag=tag, simple_value=float(value))])
        self._writer.add_event(Event(wall_time=time.time() if wall_time is None else wall_time, step=int(step),
                                     summary=summary))

    def text(self, tag: str, text: str, step: int = 0) -> None:
        """Add a text summary (TensorBoard's text dashboard; markdown)."""
        from tensorboard.compat.proto.event_pb2 import Event
        from tensorboard.plugins.text.summary_v2 import text_pb

        self._writer.add_event(Event(wall_time=time.time(), step=int(step), summary=text_pb(tag, text)))

    def flush(self) -> None:
        """Write buffered events to disk."""
        self._writer.flush()

    def close(self) -> None:
        """Flush and close the event file."""
        self._writer.close()


def _config_markdown(config_yaml: str) -> str:
    """The config as a markdown code block (four-space indent)."""
    return "\n".join("    " + line for line in config_yaml.rstrip().splitlines())


class TensorBoardObserver:
    """A :meth:`ResultsFile.observe` observer writing each appended row's scalars at once (live)."""

    def __init__(self, log: ScalarLog, kind: str) -> None:
        self.log, self.kind = log, kind
        self._rows: dict[str, int] = {}

    def append(self, table: str, rows: Mapping[str, np.ndarray]) -> None:
        """Write the scalars of ``rows`` appended to ``table`` and flush."""
        first = self._rows.get(table, 0)
        count = 0
        for scalar in scalars(self.kind, table, rows, first):
            self.log.scalar(scalar.tag, scalar.value, scalar.step)
            count += 1
        self._rows[table] = first + len(next(iter(rows.values()), ()))
        if count:
            self.log.flush()

    def close(self) -> None:
        """Close the event file."""
        self.log.close()


def run_logdir(logdir, results_path) -> Path:
    """``logdir / <results file stem>``: one TensorBoard run per results file."""
    return Path(logdir) / Path(results_path).stem


def attach(results, logdir, kind: str, config_yaml: str) -> TensorBoardObserver:
    """Stream a run's scalars to TensorBoard while it runs (rank 0; what ``--tensorboard DIR`` does).

    Parameters
    ----------
    results : hpcbench.results.ResultsFile
        The open results file.
    logdir : path
        ``--tensorboard``'s directory; the run writes to :func:`run_logdir`.
    kind : str
        The runner kind (:data:`SCALAR_TABLES`).
    config_yaml : str
        The run's config, written once as text.

    Returns
    -------
    TensorBoardObserver
        Registered with ``results``; closed when ``results`` closes.
    """
    log = ScalarLog(run_logdir(logdir, results.path))
    log.text("config", _config_markdown(config_yaml))
    log.flush()
    observer = TensorBoardObserver(log, kind)
    results.observe(observer)
    return observer


def export(path, logdir) -> tuple[Path, int]:
    """Write a finished (or interrupted) run's scalars and config to TensorBoard.

    Event wall times are the run's ``start_time`` plus the row's
    ``wall_time_s`` where the table has one.

    Parameters
    ----------
    path : path
        An hpcbench results file.
    logdir : path
        The TensorBoard directory; the run goes to :func:`run_logdir`.

    Returns
    -------
    run_dir : pathlib.Path
    count : int
        Scalars written.

    Raises
    ------
    InputError
        ``tensorboard`` is not installed, or ``path`` is no hpcbench results file.
    """
    import datetime

    import h5py

    from hpcbench.results.reader import checked, read_table

    require_tensorboard("results tensorboard")
    try:
        with h5py.File(checked(path), "r") as h5:
            kind = str(h5.attrs.get("kind", ""))
            config_yaml = str(h5.attrs.get("config_yaml", ""))
            start = str(h5.attrs.get("start_time", ""))
            if "schema_version" not in h5.attrs:
                raise InputError(f"{str(path)!r} is not an hpcbench results file (no schema_version)")
            tables = {name: read_table(h5, name) for (k, name) in SCALAR_TABLES if k == kind and name in h5}
    except OSError as exc:
        raise InputError(f"cannot read {str(path)!r}: {exc}") from None
    try:
        t0 = datetime.datetime.fromisoformat(start).timestamp()
    except ValueError:
        t0 = time.time()
    run_dir = run_logdir(logdir, path)
    log = ScalarLog(run_dir)
    count = 0
    try:
        log.text("config", _config_markdown(config_yaml))
        for name, rows in tables.items():
            wall = rows.get("wall_time_s")
            for scalar in scalars(kind, name, rows):
                offset = float(wall[scalar.row]) if wall is not None else 0.0
                log.scalar(scalar.tag, scalar.value, scalar.step, wall_time=t0 + offset)
                count += 1
    finally:
        log.close()
    return run_dir, count

"""The data a figure's claims read: its runs' results files, table by table (no MPI).

:class:`FigureData` is the :class:`~hpcbench.reproduce.expression.DataSource`
of one figure: ``table(job, name)`` concatenates table ``name`` over the
job's runs (in plan order) and adds each run's root attributes as columns
(for row filters such as ``world_size == 8``); ``table(job, "attrs")`` has
one row per run. A run whose file is missing or did not complete makes every
quantity reading its job fail with :class:`MissingData`, naming the run.
"""

from __future__ import annotations

from typing import Mapping

import numpy as np

from hpcbench.reproduce.expression import ExpressionError
from hpcbench.reproduce.plan import Run
from hpcbench.runtime.errors import InputError

__all__ = ["MissingData", "FigureData"]


class MissingData(ExpressionError):
    """A run the quantity needs has no completed results file."""


def _scalar_attrs(attrs: Mapping) -> dict:
    out = {}
    for key, value in attrs.items():
        if key in ("config", "config_json", "config_yaml"):
            continue
        if isinstance(value, bytes):
            value = value.decode()
        if isinstance(value, (str, int, float, bool, np.integer, np.floating)):
            out[key] = value
    return out


def _column(values: list) -> np.ndarray:
    """Numbers as float64 (missing: NaN), anything else as an object array of str (missing: '')."""
    if all(isinstance(v, (int, float, np.integer, np.floating)) and not isinstance(v, bool) or v is None
           for v in values):
        return np.asarray([np.nan if v is None else float(v) for v in values], dtype=np.float64)
    return np.asarray(["" if v is None else str(v) for v in values], dtype=object)


class FigureData:
    """Tables of a figure's runs, loaded on first use and kept.

    Parameters
    ----------
    runs : list of Run
        The figure's runs in the plan (any tier's).
    """

    def __init__(self, runs: list[Run]) -> None:
        self.runs = runs
        self._attrs: dict[str, dict] = {}
        self._tables: dict[tuple[str, str], dict[str, np.ndarray]] = {}

    def _runs(self, job: str) -> list[Run]:
        runs = [r for r in self.runs if r.job.id == job]
        if not runs:
            raise MissingData(f"job {job!r} has no run in this tier")
        return runs

    def attrs(self, run: Run) -> dict:
        """Root attributes of a completed run's file.

        Raises
        ------
        MissingData
            The file is missing, unreadable, or its run did not complete.
        """
        if run.key not in self._attrs:
            from hpcbench.results.reader import open_file, read_attrs
            from hpcbench.results.status import run_status

            if not run.output.is_file():
                raise MissingData(f"run {run.name}: no results file {run.output}")
            try:
                with open_file(run.output) as h5:
                    attrs = read_attrs(h5)
            except (OSError, InputError) as exc:
                raise MissingData(f"run {run.name}: unreadable results file ({exc})") from None
            status = run_status(run.output, attrs)
            if not status.completed:
                raise MissingData(f"run {run.name}: status {status}")
            self._attrs[run.key] = attrs
        return self._attrs[run.key]

    def table(self, job: str, name: str) -> Mapping[str, np.ndarray]:
        """Table ``name`` over the job's runs plus their root attributes (``"attrs"``: one row per run)."""
        key = (job, name)
        if key not in self._tables:
            self._tables[key] = self._load(job, name)
        return self._tables[key]

    def _load(self, job: str, name: str) -> dict[str, np.ndarray]:
        from hpcbench.results.reader import open_file, read_table

        runs = self._runs(job)
        attrs = [_scalar_attrs(self.attrs(r)) for r in runs]
        if name == "attrs":
            keys = list(dict.fromkeys(k for a in attrs for k in a))
            return {k: _column([a.get(k) for a in attrs]) for k in keys}
        parts = []
        for run, a in zip(runs, attrs):
            with open_file(run.output) as h5:
                if name not in h5 or "columns" not in h5[name].attrs:
                    raise ExpressionError(f"run {run.name}: no table {name!r} (has "
                                          f"{', '.join(sorted(h5.keys()))})")
                parts.append((read_table(h5, name), a))
        columns = [c for c in parts[0][0] if all(c in t for t, _ in parts)]
        out = {c: np.concatenate([np.asarray(t[c]) for t, _ in parts]) for c in columns}
        lengths = [len(t[columns[0]]) if columns else 0 for t, _ in parts]
        keys = [k for k in dict.fromkeys(k for _, a in parts for k in a) if k not in out]
        for k in keys:
            out[k] = np.repeat(_column([a.get(k) for _, a in parts]), lengths)
        return out

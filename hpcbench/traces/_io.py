"""Shared helpers for the trace loaders: file reading and value checks.

Bounded whatever the file holds: JSON nested too deeply for the parser is a
:class:`TraceError`, not a ``RecursionError``, and values are shortened in
messages (:func:`hpcbench.runtime.bounded.short_repr`) without being walked.
"""

from __future__ import annotations

import json
import math
import os
import pathlib
from typing import Any

import numpy as np

from hpcbench.runtime.bounded import InputFileError, read_input, short_repr

from .errors import TraceError

PathLike = str | os.PathLike[str]


def resolve(path: PathLike | None, bundled: str) -> pathlib.Path:
    """Return ``path``, or the bundled trace file ``bundled`` when None."""
    if path is None:
        from hpcbench.data import data_path

        return data_path("traces", bundled)
    return pathlib.Path(path)


def read_bytes(path: pathlib.Path) -> bytes:
    """Read a trace file, transparently decompressing ``*.gz``; TraceError on failure.

    Only a regular file within the trace bound is read (:func:`hpcbench.runtime.bounded.read_input`):
    a device, a FIFO or an oversized file is refused before anything is read.
    """
    try:
        return read_input(path, "trace", "trace", "trace file")
    except InputFileError as exc:
        raise TraceError(path, exc.detail) from None


def read_json(path: pathlib.Path) -> Any:
    """Parse a JSON (or gzipped JSON) file; TraceError on malformed content."""
    raw = read_bytes(path)
    try:
        return json.loads(raw)
    except UnicodeDecodeError as exc:
        raise TraceError(path, f"malformed JSON: not UTF-8 text ({exc})") from None
    except json.JSONDecodeError as exc:
        raise TraceError(
            path, f"malformed JSON: {exc.msg} at line {exc.lineno} column {exc.colno}"
        ) from None
    except RecursionError:
        raise TraceError(path, "malformed JSON: nested too deeply") from None


def expect(path: PathLike, where: str, value: Any, kind: type | tuple, what: str) -> Any:
    """Check ``isinstance(value, kind)``; TraceError naming ``where`` otherwise."""
    if not isinstance(value, kind) or (kind is not bool and isinstance(value, bool)):
        raise TraceError(path, f"{where}: expected {what}, got {type(value).__name__} {short_repr(value)}")
    return value


def get(path: PathLike, where: str, record: Any, key: str) -> Any:
    """``record[key]`` with TraceError for a non-mapping record or a missing key."""
    expect(path, where, record, dict, "an object")
    if key not in record:
        raise TraceError(path, f"{where}: missing key {key!r}")
    return record[key]


def number(path: PathLike, where: str, value: Any, *, nonneg: bool = True) -> float:
    """Validate a JSON number: not bool/str, finite, and >= 0 if ``nonneg``."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TraceError(path, f"{where}: expected a number, got {type(value).__name__} {short_repr(value)}")
    try:
        x = float(value)
    except OverflowError:  # an int beyond float's range
        raise TraceError(path, f"{where}: non-finite value {short_repr(value)}") from None
    if math.isnan(x) or math.isinf(x):
        raise TraceError(path, f"{where}: non-finite value {short_repr(value)}")
    if nonneg and x < 0:
        raise TraceError(path, f"{where}: negative value {short_repr(value)}")
    return x


def check_array(path: PathLike, where: str, arr: np.ndarray) -> np.ndarray:
    """Vectorised :func:`number` for a float array: finite and non-negative."""
    bad = ~np.isfinite(arr)
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise TraceError(path, f"{where}: non-finite value {float(arr.flat[i])!r} at index {i}")
    neg = arr < 0
    if neg.any():
        i = int(np.flatnonzero(neg)[0])
        raise TraceError(path, f"{where}: negative value {float(arr.flat[i])!r} at index {i}")
    return arr


def float_array(path: PathLike, where: str, value: Any, shape_hint: str) -> np.ndarray:
    """Convert a JSON list of numbers to float64; TraceError on wrong types/shape."""
    if not isinstance(value, list):
        raise TraceError(path, f"{where}: expected {shape_hint}, got {type(value).__name__} {short_repr(value, 80)}")
    flat = (v for item in value for v in (item if isinstance(item, list) else (item,)))
    if any(isinstance(v, (bool, str)) for v in flat):
        raise TraceError(path, f"{where}: expected {shape_hint}, got non-numeric items")
    try:
        arr = np.asarray(value, dtype=np.float64)
    except (TypeError, ValueError, OverflowError):
        raise TraceError(path, f"{where}: expected {shape_hint}, got {short_repr(value, 80)}") from None
    return check_array(path, where, arr)


def as_rows(rows: Any, n: int) -> np.ndarray:
    """Rows as an int64 array, bounds-checked against a trace of ``n`` rows."""
    r = np.asarray(rows)
    if r.dtype.kind not in "iu":
        if r.size == 0:
            r = r.astype(np.int64)
        else:
            raise TypeError(f"trace rows must be integers, got dtype {r.dtype}")
    r = r.astype(np.int64, copy=False)
    if r.size and (r.min() < 0 or r.max() >= n):
        raise IndexError(f"trace row out of range [0, {n}): min {r.min()}, max {r.max()}")
    return r

"""Printed tables people can trust: columns aligned with their headers, never ``nan``.

A value that cannot be given (NaN, None) prints as ``n/a`` or as the
reason passed with it (:class:`NA`: ``n/a (no link model)``); numbers are
right-aligned, text left-aligned, and every column is as wide as its widest
cell or header. Used by ``hpcbench reproduce`` (the claims table),
``hpcbench results`` and the runners' closing tables.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Sequence

__all__ = ["NA", "fmt", "render"]


@dataclass(frozen=True)
class NA:
    """A value that is not available, and why (printed ``n/a (why)``)."""

    why: str = ""

    def __str__(self) -> str:
        return f"n/a ({self.why})" if self.why else "n/a"


def _missing(value: Any) -> bool:
    if value is None or isinstance(value, NA):
        return True
    if isinstance(value, (str, bytes, bool)):
        return False
    try:
        return math.isnan(float(value))
    except (TypeError, ValueError):
        return False


def fmt(value: Any, spec: str = ".4g", na: str | NA = "n/a") -> str:
    """``value`` formatted with ``spec``; NaN, None and :class:`NA` give ``na`` (or the NA's own text).

    Parameters
    ----------
    value : object
        Number, string, :class:`NA` or None.
    spec : str
        Format spec for numbers (``".3f"``, ``"+.1%"``).
    na : str or NA
        Text for a missing value.
    """
    if isinstance(value, NA):
        return str(value)
    if _missing(value):
        return str(na)
    if isinstance(value, bool):
        return str(value).lower()
    if not isinstance(value, (str, bytes)):
        try:
            return format(value, spec)
        except (TypeError, ValueError):
            return str(value)
    return str(value)


def _is_number(value: Any) -> bool:
    if isinstance(value, (str, bytes, bool)):
        return False
    try:
        float(value)
        return True
    except (TypeError, ValueError):
        return _missing(value)


def render(header: Sequence[str], rows: Sequence[Sequence[Any]], units: Sequence[str] | None = None,
           formats: Sequence[str] | None = None, sep: str = "  ", prefix: str = "") -> list[str]:
    """Lines of an aligned table: header, optional units line (nccl-tests style), then the rows.

    Parameters
    ----------
    header : sequence of str
        Column names.
    rows : sequence of sequences
        One value per column; numbers are formatted with ``formats``, missing
        values (NaN, None, :class:`NA`) print as ``n/a`` or their reason.
    units : sequence of str, optional
        A second header line, e.g. ``("(B)", "(us)")``.
    formats : sequence of str, optional
        Format spec per column (default ``".4g"``).
    sep : str
        Between columns.
    prefix : str
        Before every line (``"# "`` for comment-style headers).

    Returns
    -------
    list of str
        Without trailing spaces.
    """
    ncol = len(header)
    formats = list(formats or [".4g"] * ncol)
    cells = [[fmt(v, formats[j]) for j, v in enumerate(row)] for row in rows]
    numeric = [all(_is_number(row[j]) for row in rows) and bool(rows) for j in range(ncol)]
    heads = [list(header)] + ([[f"{u}" for u in units]] if units else [])
    widths = [max(len(line[j]) for line in heads + cells) for j in range(ncol)]

    def line(values):
        parts = [(v.rjust(w) if numeric[j] else v.ljust(w)) for j, (v, w) in enumerate(zip(values, widths))]
        return (prefix + sep.join(parts)).rstrip()

    return [line(h) for h in heads] + [line(c) for c in cells]

"""Each runner's headline figures, read from its results file (``hpcbench results show/ls/diff``).

Each runner declares its function (:class:`hpcbench.results.kinds.RunnerKind`
``headlines``, in its declaration module), reading tables and root
attributes only (no MPI): the numbers a person looks for first
(time-to-accuracy, throughput and efficiency, busbw, speed-up). A figure
that cannot be given is an :class:`~hpcbench.runtime.texttable.NA` with the
reason (target not reached, synchroniser skipped, no MPI row).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Mapping

from hpcbench.results.kinds import KINDS

__all__ = ["Headline", "headlines", "number"]


@dataclass(frozen=True)
class Headline:
    """One headline figure: name, value (a number, text, or NA with the reason), unit."""

    name: str
    value: Any
    unit: str = ""


def number(x) -> float:
    """``float(x)``, NaN where it is none (a missing or text attribute)."""
    try:
        return float(x)
    except (TypeError, ValueError):
        return math.nan


def headlines(path, attrs: Mapping[str, Any] | None = None) -> list[Headline]:
    """The headline figures of results file ``path`` (empty for a kind without any).

    Raises
    ------
    OSError
        The file cannot be read.
    """
    from hpcbench.results.reader import read_attrs, read_consistent

    def read(h5):
        found = read_attrs(h5) if attrs is None else attrs
        declared = KINDS.get(str(found.get("kind", "")))
        return [] if declared is None or declared.headlines is None else declared.headlines(h5, found)

    return read_consistent(path, read)

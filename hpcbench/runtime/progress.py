"""Progress of a long loop on rank 0: a tqdm bar on a terminal, a plain line every few percent elsewhere.

Under Slurm (a ``.out`` file) or in a pipe a carriage-return bar writes one
redraw per update into the file; :func:`progress_bar` gives a bar only when
its stream is a terminal, and otherwise :class:`LineProgress`, which has the
same methods (``update``, ``set_postfix``, ``write``, ``reset``, ``close``) and prints
one line each time another ``every_pct`` percent is done. Lines printed
while a bar is open go through ``bar.write`` (``tqdm.write`` on a terminal),
so bars and lines never interleave.
"""

from __future__ import annotations

import sys
import time
from typing import IO, Any

__all__ = ["progress_bar", "LineProgress", "is_terminal"]


def is_terminal(stream: IO) -> bool:
    """True when ``stream`` is an interactive terminal (``isatty``)."""
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):
        return False


class LineProgress:
    """tqdm's interface for streams that are not terminals: one line per ``every_pct`` percent.

    Parameters
    ----------
    total : int or None
        Units of the whole loop (None or 0: unknown, no progress lines).
    desc : str
        Label at the start of each line.
    unit : str
        What a unit is (``"round"``, ``"step"``).
    file : file
        Where the progress lines go (default stderr).
    initial : int
        Units already done (a resumed run).
    every_pct : float
        Percent of ``total`` between two lines (default 10).
    disable : bool
        Print nothing (``write`` still prints).
    """

    def __init__(self, total: int, desc: str = "", unit: str = "it", file: IO | None = None, initial: int = 0,
                 every_pct: float = 10.0, disable: bool = False) -> None:
        self.total, self.desc, self.unit = int(total or 0), desc, unit
        self.file = sys.stderr if file is None else file
        self.n = int(initial)
        self.disable = disable
        self._every_pct = every_pct
        self._step = max(1, int(round(self.total * every_pct / 100.0)))
        self._next = (self.n // self._step + 1) * self._step
        self._postfix = ""
        self._t0 = time.monotonic()

    def update(self, n: int = 1) -> None:
        """Count ``n`` more units; print a line when another step of percent is done (or at the end)."""
        self.n += n
        if self.disable or self.total <= 0:
            return
        if self.n >= self._next or self.n == self.total:
            self._next = (self.n // self._step + 1) * self._step
            self._line()

    def _line(self) -> None:
        elapsed = time.monotonic() - self._t0
        pct = 100.0 * self.n / self.total
        label = f"{self.desc}: " if self.desc else ""
        post = f", {self._postfix}" if self._postfix else ""
        self.file.write(f"{label}{self.n}/{self.total} {self.unit}s ({pct:.0f} %), {elapsed:.1f} s{post}\n")
        self.file.flush()

    def set_postfix(self, ordered_dict=None, refresh: bool = True, **kwargs: Any) -> None:
        """Values shown at the end of the next line (``acc=0.91, vtime=120s``)."""
        items = dict(ordered_dict or {}, **kwargs)
        self._postfix = ", ".join(f"{k}={v}" for k, v in items.items())

    def set_postfix_str(self, s: str = "", refresh: bool = True) -> None:
        """Text shown at the end of the next line."""
        self._postfix = s

    def write(self, s: str, file: IO | None = None, end: str = "\n") -> None:
        """Print a line (to ``file``, default stdout), as ``tqdm.write``."""
        out = sys.stdout if file is None else file
        out.write(s + end)
        out.flush()

    def reset(self, total: int | None = None) -> None:
        """Start again from 0 (with a new ``total`` when given), as ``tqdm.reset``."""
        if total is not None:
            self.total = int(total)
            self._step = max(1, int(round(self.total * self._every_pct / 100.0)))
        self.n = 0
        self._next = self._step
        self._t0 = time.monotonic()

    def close(self) -> None:
        """Nothing to clear: every line is already written."""


def progress_bar(total: int, desc: str = "", unit: str = "it", file: IO | None = None, initial: int = 0,
                 disable: bool = False, every_pct: float = 10.0, **tqdm_kwargs: Any):
    """A tqdm bar when ``file`` (default stderr) is a terminal, else a :class:`LineProgress`.

    Parameters
    ----------
    total, desc, unit, initial, disable
        As tqdm's.
    file : file, optional
        The bar's stream (default ``sys.stderr``).
    every_pct : float
        Without a terminal: percent between two lines.
    **tqdm_kwargs
        Passed to tqdm (``leave``, ``dynamic_ncols``).

    Returns
    -------
    tqdm.tqdm or LineProgress
        Both have ``update``, ``set_postfix``, ``write`` and ``close``.
    """
    stream = sys.stderr if file is None else file
    if is_terminal(stream):
        from tqdm import tqdm

        return tqdm(total=total, desc=desc or None, unit=unit, file=stream, initial=initial, disable=disable,
                    **tqdm_kwargs)
    return LineProgress(total, desc, unit, stream, initial, every_pct, disable)

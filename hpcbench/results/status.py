"""What state a results file is in: the one place that decides it.

``hpcbench results ls/show`` and ``hpcbench reproduce`` (whether a run can be
skipped) ask :func:`run_status`; a better test of an interrupted run (a
heartbeat) goes here and every caller sees it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

__all__ = ["RunStatus", "run_status"]


@dataclass(frozen=True)
class RunStatus:
    """A run's state and a few words on it.

    Attributes
    ----------
    state : str
        ``completed``, ``failed``, ``running`` (still written, or killed
        without a chance to say so), or ``unknown`` (no ``status`` attribute).
    detail : str
        The error of a failed run, the end time of a finished one, or ``""``.
    """

    state: str
    detail: str = ""

    @property
    def completed(self) -> bool:
        """True for a run that ended normally (its tables are whole)."""
        return self.state == "completed"

    def __str__(self) -> str:
        return f"{self.state} ({self.detail})" if self.detail else self.state


def run_status(path, attrs: Mapping[str, Any] | None = None) -> RunStatus:
    """The state of the run in results file ``path``.

    Parameters
    ----------
    path : str or pathlib.Path
        The results file.
    attrs : mapping, optional
        Its root attributes, when already read (:func:`hpcbench.results.read_attrs`).

    Returns
    -------
    RunStatus

    Raises
    ------
    OSError
        The file cannot be read.
    """
    if attrs is None:
        from hpcbench.results.reader import read_attrs

        attrs = read_attrs(path)
    state = str(attrs.get("status", "unknown"))
    if state == "failed":
        return RunStatus(state, str(attrs.get("error", "")))
    if state == "completed":
        return RunStatus(state, f"ended {attrs['end_time']}" if attrs.get("end_time") else "")
    return RunStatus(state)

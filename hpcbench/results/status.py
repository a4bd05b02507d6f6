"""What state a result file is in: completed, failed, running, or interrupted (a kill left it ``running``).

A run's lifecycle records ``status`` (``running`` while it runs, then
``completed`` or ``failed``). A process killed outright (SIGKILL, the
out-of-memory killer, a node failure) cannot record anything, so its file
keeps ``running`` for ever; the writer's ``heartbeat`` (refreshed every
:data:`hpcbench.results.writer.HEARTBEAT_S` seconds), ``writer_host`` and
``writer_pid`` tell such a file from a live run: on the writer's host, a
file whose writer process is gone was interrupted; elsewhere, one whose
heartbeat is older than :data:`STALE_S` seconds.
"""

from __future__ import annotations

import os
import socket
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Mapping

__all__ = ["RunStatus", "run_status", "file_status", "classify", "STALE_S"]

#: a ``running`` file whose heartbeat is older than this many seconds is taken as interrupted
STALE_S = 60.0


@dataclass(frozen=True)
class RunStatus:
    """A run's state and a few words on it.

    Attributes
    ----------
    state : {"completed", "failed", "running", "interrupted", "unknown"}
        ``interrupted``: marked ``running`` by a writer that no longer runs;
        ``unknown``: no readable ``status`` attribute.
    detail : str
        Why (the error of a failed run, the end time of a finished one, the
        age of the last heartbeat, ...).
    """

    state: str
    detail: str = ""

    @property
    def completed(self) -> bool:
        """True for a run that ended normally (its tables are whole)."""
        return self.state == "completed"

    def __str__(self) -> str:
        return f"{self.state} ({self.detail})" if self.detail else self.state


def _text(value) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's process: it exists
        return True
    except OSError:
        return False
    try:  # a zombie has finished running
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return True


def classify(attrs: dict, now: datetime | None = None, host: str | None = None) -> RunStatus:
    """The state of a result file from its root attributes.

    Parameters
    ----------
    attrs : dict
        Root attributes (:func:`hpcbench.results.read_attrs`).
    now : datetime, optional
        Current UTC time (default: the clock's).
    host : str, optional
        This machine's host name (default ``socket.gethostname()``).

    Returns
    -------
    RunStatus
    """
    status = _text(attrs.get("status", ""))
    if status == "failed":
        return RunStatus(status, _text(attrs.get("error", "")))
    if status == "completed":
        end = attrs.get("end_time")
        return RunStatus(status, f"ended {_text(end)}" if end else "")
    if status != "running":
        return RunStatus("unknown", f"status attribute {status!r}")
    beat = attrs.get("heartbeat")
    if beat is None:
        return RunStatus("running", "no heartbeat recorded (written by an older hpcbench): it may have been "
                                     "interrupted")
    now = now or datetime.now(timezone.utc)
    try:
        age = (now - datetime.fromisoformat(_text(beat))).total_seconds()
    except (TypeError, ValueError):
        return RunStatus("unknown", f"unreadable heartbeat {_text(beat)!r}")
    writer, pid = _text(attrs.get("writer_host", "")), attrs.get("writer_pid")
    if writer and writer == (host or socket.gethostname()) and pid is not None:
        if not _pid_alive(int(pid)):
            return RunStatus("interrupted", f"its writer (process {int(pid)} on {writer}) is gone; last "
                                             f"heartbeat {age:.0f} s ago")
        if age <= STALE_S:
            return RunStatus("running", f"process {int(pid)} on {writer}, heartbeat {age:.0f} s ago")
    if age > STALE_S:
        return RunStatus("interrupted", f"no heartbeat for {age:.0f} s (written every few seconds while it runs)")
    return RunStatus("running", f"heartbeat {age:.0f} s ago on {writer or 'an unknown host'}")


def file_status(path: str | Path, now: datetime | None = None) -> RunStatus:
    """:func:`classify` of the file at ``path`` (read without HDF5's file lock, so a live run's file opens too).

    Raises
    ------
    OSError
        The file cannot be read as HDF5.
    """
    import h5py

    from hpcbench.results.reader import checked

    with h5py.File(checked(path), "r", locking=False) as h5:
        attrs = dict(h5.attrs.items())
    return classify(attrs, now)


def run_status(path, attrs: Mapping[str, Any] | None = None) -> RunStatus:
    """The state of the run in results file ``path``: :func:`classify` of its attributes.

    The one place that decides it: ``hpcbench results ls/show`` and
    ``hpcbench reproduce`` (whether a run can be skipped) ask it.

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
        The file cannot be read as HDF5.
    """
    if attrs is None:
        return file_status(path)
    return classify(dict(attrs))

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

__all__ = ["FileStatus", "file_status", "classify", "STALE_S"]

#: a ``running`` file whose heartbeat is older than this many seconds is taken as interrupted
STALE_S = 60.0


@dataclass(frozen=True)
class FileStatus:
    """A result file's state.

    Attributes
    ----------
    status : {"completed", "failed", "running", "interrupted", "unknown"}
        ``interrupted``: marked ``running`` by a writer that no longer runs.
    detail : str
        Why (the error of a failed run, the age of the last heartbeat, ...).
    """

    status: str
    detail: str = ""


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


def classify(attrs: dict, now: datetime | None = None, host: str | None = None) -> FileStatus:
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
    FileStatus
    """
    status = _text(attrs.get("status", ""))
    if status in ("completed", "failed"):
        return FileStatus(status, _text(attrs.get("error", "")) if status == "failed" else "")
    if status != "running":
        return FileStatus("unknown", f"status attribute {status!r}")
    beat = attrs.get("heartbeat")
    if beat is None:
        return FileStatus("running", "no heartbeat recorded (written by an older hpcbench): it may have been "
                                     "interrupted")
    now = now or datetime.now(timezone.utc)
    try:
        age = (now - datetime.fromisoformat(_text(beat))).total_seconds()
    except (TypeError, ValueError):
        return FileStatus("unknown", f"unreadable heartbeat {_text(beat)!r}")
    writer, pid = _text(attrs.get("writer_host", "")), attrs.get("writer_pid")
    if writer and writer == (host or socket.gethostname()) and pid is not None:
        if not _pid_alive(int(pid)):
            return FileStatus("interrupted", f"its writer (process {int(pid)} on {writer}) is gone; last "
                                             f"heartbeat {age:.0f} s ago")
        if age <= STALE_S:
            return FileStatus("running", f"process {int(pid)} on {writer}, heartbeat {age:.0f} s ago")
    if age > STALE_S:
        return FileStatus("interrupted", f"no heartbeat for {age:.0f} s (written every few seconds while it runs)")
    return FileStatus("running", f"heartbeat {age:.0f} s ago on {writer or 'an unknown host'}")


def file_status(path: str | Path, now: datetime | None = None) -> FileStatus:
    """:func:`classify` of the file at ``path`` (read without HDF5's file lock, so a live run's file opens too).

    Raises
    ------
    OSError
        The file cannot be read as HDF5.
    """
    import h5py

    with h5py.File(path, "r", locking=False) as h5:
        attrs = dict(h5.attrs.items())
    return classify(attrs, now)

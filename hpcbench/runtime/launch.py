"""Launch MPI jobs from a driver process (benchmarks that compare world sizes)."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

__all__ = ["find_mpiexec"]


def find_mpiexec() -> str:
    """The MPI launcher to use: ``$HPCBENCH_MPIEXEC``, the one beside this Python, or ``mpiexec`` on PATH.

    Raises
    ------
    FileNotFoundError
        If none is found.
    """
    env = os.environ.get("HPCBENCH_MPIEXEC")
    if env:
        return env
    here = Path(sys.executable).parent / "mpiexec"
    if here.exists():
        return str(here)
    found = shutil.which("mpiexec") or shutil.which("mpirun")
    if not found:
        raise FileNotFoundError("no mpiexec found: install the mpich wheel or set HPCBENCH_MPIEXEC")
    return found


def end_process_group(proc: subprocess.Popen, grace_s: float = 5.0) -> None:
    """End a child started with ``start_new_session=True`` and everything it started.

    Does nothing if ``proc`` has exited; otherwise sends SIGTERM to its process
    group, then SIGKILL if it has not exited after ``grace_s`` seconds. A
    launcher calls it in a ``finally`` block, so an ``mpiexec`` job or a Ray
    cluster never outlives the benchmark that started it.

    Parameters
    ----------
    proc : subprocess.Popen
        The child; its pid is its process group id (``start_new_session=True``).
    grace_s : float
        Seconds to wait after each signal.
    """
    if proc.poll() is not None:
        return
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(timeout=grace_s)
            return
        except subprocess.TimeoutExpired:
            continue

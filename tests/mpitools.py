"""Launching real MPI jobs from pytest (``run_mpi``)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def mpiexec_path() -> str:
    """The ``mpiexec`` beside this Python (the mpich wheel's), else the one on PATH."""
    here = Path(sys.executable).parent / "mpiexec"
    if here.exists():
        return str(here)
    found = shutil.which("mpiexec")
    if not found:
        pytest.skip("no mpiexec found")
    return found


def run_mpi(n: int, args: list[str], timeout: float = 300, cwd: Path | None = None,
            env: dict | None = None) -> subprocess.CompletedProcess:
    """Run ``mpiexec -n N python ARGS...`` and return the finished process (text output)."""
    full_env = dict(os.environ)
    full_env.setdefault("PYTHONUNBUFFERED", "1")
    full_env["OMP_NUM_THREADS"] = "1"
    if env:
        full_env.update(env)
    cmd = [mpiexec_path(), "-n", str(n), sys.executable, *args]
    try:
        return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout,
                              cwd=str(cwd or ROOT), env=full_env, stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired as exc:
        raise AssertionError(f"timed out after {timeout}s: {' '.join(cmd)}\n"
                             f"stdout:\n{exc.stdout}\nstderr:\n{exc.stderr}") from None




def wait_unlocked(path: Path, timeout: float = 15.0) -> None:
    """Wait until no process holds HDF5's lock on ``path`` (a killed writer is reaped a moment
    after ``mpiexec`` returns on a loaded machine)."""
    import time

    import h5py

    deadline = time.monotonic() + timeout
    while True:
        try:
            with h5py.File(path, "r"):
                return
        except BlockingIOError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)

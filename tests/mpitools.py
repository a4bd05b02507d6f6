"""The package's MPI launcher (:mod:`hpcbench.runtime.launch`) for pytest: a missing mpiexec skips."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

import pytest

from hpcbench.runtime import launch

ROOT = Path(__file__).resolve().parent.parent


def mpiexec_path() -> str:
    """The launcher :func:`hpcbench.runtime.launch.find_mpiexec` finds; skips the test without one."""
    try:
        return launch.find_mpiexec()
    except FileNotFoundError:
        pytest.skip("no mpiexec found")


def run_mpi(n: int, args: list[str], timeout: float = 300, cwd: Path | None = None,
            env: dict | None = None) -> subprocess.CompletedProcess:
    """:func:`hpcbench.runtime.launch.run_mpi` from the repository root; a timeout fails the test with the output."""
    mpiexec_path()
    try:
        return launch.run_mpi(n, args, timeout=timeout, cwd=cwd or ROOT, env=env)
    except launch.LaunchTimeout as exc:
        raise AssertionError(f"{exc}\nstdout:\n{exc.stdout}\nstderr:\n{exc.stderr}") from None


def wait_unlocked(path: Path, timeout: float = 15.0) -> None:
    """Wait until no process holds HDF5's lock on ``path`` (a killed writer is reaped a moment
    after ``mpiexec`` returns on a loaded machine)."""
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

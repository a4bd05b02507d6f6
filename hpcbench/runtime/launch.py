"""Launch MPI jobs from a driver process (benchmarks that compare world sizes)."""

from __future__ import annotations

import os
import shutil
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

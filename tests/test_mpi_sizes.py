"""Run every in-MPI test file of ``tests/mpi`` under ``mpiexec -n 1, 2, 3, 4``."""

from __future__ import annotations

from pathlib import Path

import pytest

from mpitools import run_mpi

MPI_TESTS = sorted(p.name for p in (Path(__file__).parent / "mpi").glob("test_*.py"))


@pytest.mark.mpi
@pytest.mark.parametrize("nprocs", [1, 2, 3, 4])
@pytest.mark.parametrize("test_file", MPI_TESTS)
def test_under_mpiexec(test_file, nprocs):
    proc = run_mpi(nprocs, ["-m", "pytest", "-q", "-x", "-p", "no:cacheprovider",
                            f"tests/mpi/{test_file}"], timeout=900)
    assert proc.returncode == 0, (f"mpiexec -n {nprocs} pytest tests/mpi/{test_file} failed "
                                  f"(rc={proc.returncode})\n{proc.stdout[-6000:]}\n{proc.stderr[-6000:]}")

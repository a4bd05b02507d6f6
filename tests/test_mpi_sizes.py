"""Run every in-MPI test file of ``tests/mpi`` under ``mpiexec -n 1, 2, 3, 4``.

One launch per world size runs all the files: starting the ranks (Python,
mpi4py, torch, pytest's collection) costs 3-8 s per launch on 2 cores,
which one launch per file paid 17 times per size. A failure on any rank
aborts the job (``tests/mpi/conftest.py``) and is reported here with the
failing test's node id.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from mpitools import run_mpi

MPI_TESTS = sorted(p.name for p in (Path(__file__).parent / "mpi").glob("test_*.py"))


@pytest.mark.mpi
@pytest.mark.parametrize("nprocs", [1, 2, 3, 4])
def test_under_mpiexec(nprocs):
    assert "test_collectives.py" in MPI_TESTS, MPI_TESTS
    proc = run_mpi(nprocs, ["-m", "pytest", "-q", "-x", "-p", "no:cacheprovider",
                            *(f"tests/mpi/{name}" for name in MPI_TESTS)], timeout=1500)
    failed = [line for line in proc.stderr.splitlines() if "] FAILED " in line]
    assert proc.returncode == 0, (f"mpiexec -n {nprocs} pytest tests/mpi failed (rc={proc.returncode}): "
                                  f"{'; '.join(failed) or 'see the output'}\n{proc.stdout[-6000:]}\n"
                                  f"{proc.stderr[-6000:]}")
    assert " passed" in proc.stdout, proc.stdout[-2000:]

"""Shared fixtures."""

import pytest

from mpitools import run_mpi


@pytest.fixture
def mpirun():
    """The :func:`mpitools.run_mpi` launcher as a fixture."""
    return run_mpi

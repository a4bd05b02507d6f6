"""Tests in this folder run inside an MPI job (``mpiexec -n N python -m pytest tests/mpi``).

They must pass at any world size: branch on ``comm.size``. A failure on one rank
aborts the whole job, so the other ranks cannot hang in a collective.
"""

from __future__ import annotations

import sys

import pytest
from mpi4py import MPI


@pytest.fixture
def comm():
    """A fresh duplicate of ``MPI.COMM_WORLD`` per test."""
    c = MPI.COMM_WORLD.Dup()
    yield c
    c.Free()


@pytest.fixture
def workers(monkeypatch):
    """Every replica the training loop builds on this rank (their models stay readable after the run; the last
    is the one that ended the run here)."""
    from hpcbench.train.steps import replica

    built = []
    real = replica.build_worker

    def build(ctx, model=None):
        w = real(ctx, model)
        built.append(w)
        return w

    monkeypatch.setattr(replica, "build_worker", build)
    return built


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    if report.failed and MPI.COMM_WORLD.size > 1:
        sys.stderr.write(f"[rank {MPI.COMM_WORLD.rank}] FAILED {item.nodeid}\n{report.longreprtext}\n")
        sys.stderr.flush()
        MPI.COMM_WORLD.Abort(1)

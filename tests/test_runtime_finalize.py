"""hpcbench.runtime.finalize: hooks run once, in order, before MPI finalizes."""

from __future__ import annotations

from mpi4py import MPI  # noqa: F401 - MPI initialized, as in every rank

from hpcbench.runtime import finalize


def test_hooks_run_once_in_order_and_survive_a_failure(monkeypatch, capsys):
    monkeypatch.setattr(finalize, "_HOOKS", [])
    ran = []
    finalize.before_finalize(lambda: ran.append(1))

    @finalize.before_finalize
    def broken():
        raise RuntimeError("boom")

    finalize.before_finalize(lambda: ran.append(3))
    finalize.run_before_finalize()
    assert ran == [1, 3]
    assert "broken failed: RuntimeError('boom')" in capsys.readouterr().err
    finalize.run_before_finalize()               # nothing left to run
    assert ran == [1, 3]

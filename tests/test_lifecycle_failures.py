"""Failures outside ``run()`` end every rank too (configure, prepare, opening the output),
and the micro-benchmarks stop at their fault points like every runner."""

from __future__ import annotations


import pytest

from mpitools import run_mpi, wait_unlocked

_JOB = """
import sys
from hpcbench.lifecycle import Job, main

class Failing(Job):
    prog = "failing"
    def add_arguments(self, parser):
        parser.add_argument("--where")
    def configure(self, args):
        self.where = args.where
        if self.where == "configure" and self.comm.rank == 1:
            raise RuntimeError("bug in configure")
    def prepare(self):
        if self.where == "prepare" and self.comm.rank == 1:
            raise RuntimeError("bug in prepare")
        self.comm.Barrier()                 # collective: rank 0 would wait here forever
    def provenance(self):
        if self.where == "provenance":
            raise RuntimeError("bug in provenance")
        return {}
    def output(self):
        return "{job}.h5", {"job": "never-" + str(self.where)}
    def run(self, results):
        return 0

main(Failing)
"""


@pytest.mark.mpi
@pytest.mark.parametrize("where", ["configure", "prepare", "provenance"])
def test_non_input_failure_before_run_ends_every_rank(tmp_path, where):
    proc = run_mpi(2, ["-c", _JOB, "--where", where], timeout=60, cwd=tmp_path)   # a hang fails at the timeout
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert f"bug in {where}" in proc.stderr
    assert not list(tmp_path.glob("*.h5"))


@pytest.mark.mpi
def test_collectives_benchmark_fault_point(tmp_path):
    out = tmp_path / "c.h5"
    proc = run_mpi(2, ["-m", "hpcbench.collectives.bench", "-b", "1K", "-e", "16K", "-n", "5", "-w", "1",
                       "-a", "mpi,ring", "--fault-inject", "1:2:raise", "--output", str(out)], timeout=60)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "fault injected on rank 1 at step 2" in proc.stderr
    from hpcbench.results import read_attrs, read_table
    wait_unlocked(out)
    assert read_attrs(out)["fault_injection"] == "1:2:raise"
    assert set(read_table(out, "results")["size"]) == {1024}       # the first size's rows survive

"""The sbatch templates under a real Slurm (skipped where no Slurm controller answers).

Start one with ``../shared/tools/local-slurm.sh start`` (see its README). Checks
that the documented exit status 2 for bad input survives ``sbatch`` + ``srun``,
and that a failing rank ends the whole step within seconds.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import time

import pytest

from mpitools import ROOT


def _slurm_up() -> bool:
    if not shutil.which("sbatch") or not shutil.which("scontrol"):
        return False
    try:
        return subprocess.run(["scontrol", "ping"], capture_output=True, text=True, timeout=10).stdout.count("UP") > 0
    except (OSError, subprocess.SubprocessError):
        return False


pytestmark = [pytest.mark.mpi, pytest.mark.skipif(not _slurm_up(), reason="no Slurm controller answers")]


def _submit(tmp_path, *args: str, ntasks: int = 3, timeout: float = 240.0):
    out = tmp_path / "job.out"
    job_id = subprocess.run(["sbatch", "--parsable", f"--ntasks={ntasks}", f"--output={out}", "jobs/fl.sbatch",
                             *args], cwd=str(ROOT), capture_output=True, text=True, check=True,
                            timeout=60).stdout.strip().split(";")[0]
    deadline = time.time() + timeout
    while time.time() < deadline:
        info = subprocess.run(["scontrol", "show", "job", job_id], capture_output=True, text=True).stdout
        state = re.search(r"JobState=(\w+)", info)
        if state and state.group(1) not in ("PENDING", "RUNNING", "CONFIGURING", "COMPLETING"):
            code = re.search(r"\bExitCode=(\d+):(\d+)", info)
            start = re.search(r"StartTime=(\S+)", info).group(1)
            end = re.search(r"EndTime=(\S+)", info).group(1)
            return int(code.group(1)), out.read_text() if out.exists() else "", start, end
        time.sleep(0.5)
    subprocess.run(["scancel", job_id])
    raise AssertionError(f"job {job_id} did not end in {timeout} s")


def test_bad_input_exit_2_under_sbatch(tmp_path):
    code, log, _, _ = _submit(tmp_path, "jobs/configs/digits.yaml", "--rounds", "zero")
    assert code == 2, log[-3000:]
    assert log.count("'rounds'") == 1, log


@pytest.mark.parametrize("fault, status, state", [
    ("1:3:raise", 1, "failed"),   # srun would report 137 for MPI_Abort: the lifecycle leaves with 1 instead
    ("2:3:input", 2, "failed"),
    ("1:3:exit", 1, "failed"),    # a rank vanishes: --kill-on-bad-exit's SIGTERM is a failure for the others
])
def test_failing_rank_ends_the_step(tmp_path, fault, status, state):
    from hpcbench.results.status import file_status

    code, log, _, _ = _submit(tmp_path, "jobs/configs/digits.yaml", "--rounds", "400", "--eval_interval", "50",
                              "--progress", "false", "--output", str(tmp_path / "x.h5"),
                              "--fault-inject", fault)
    assert code == status and f"fault injected on rank {fault[0]}" in log, (code, log[-3000:])
    assert file_status(tmp_path / "x.h5").state == state

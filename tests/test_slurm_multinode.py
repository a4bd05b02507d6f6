"""The sbatch templates on a real Slurm of two nodes on this machine (``scripts/multinode-slurm.sh``: one
slurmctld, a slurmd per node in its own UTS namespace). Skipped, with the reason, where that cannot start:
not root, Slurm not installed, namespaces not permitted."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import time

import pytest

from hpcbench.results import read_attrs
from hpcbench.runtime.emulated_hosts import unavailable_reason
from mpitools import ROOT

pytestmark = pytest.mark.mpi

SCRIPT = ROOT / "scripts" / "multinode-slurm.sh"
BASE = "/tmp/hpcbench-multinode-slurm-tests"


def _why_not() -> str:
    if os.geteuid() != 0:
        return "not root"
    missing = [c for c in ("slurmctld", "slurmd", "sbatch", "munged") if shutil.which(c) is None]
    if missing:
        return f"Slurm not installed (no {', '.join(missing)}; ../shared/tools/local-slurm.sh start installs it)"
    return unavailable_reason()


@pytest.fixture(scope="module")
def two_nodes():
    """The cluster's environment (``SLURM_CONF``) while it runs; stopped after the module."""
    why = _why_not()
    if why:
        pytest.skip(f"multi-node Slurm unavailable: {why}")
    env = {**os.environ, "MULTINODE_SLURM_DIR": BASE, "MULTINODE_SLURM_CTLD_PORT": "6947",
           "MULTINODE_SLURM_SLURMD_PORT": "6951"}
    proc = subprocess.run(["bash", str(SCRIPT), "start", "2"], env=env, capture_output=True, text=True, timeout=120)
    if proc.returncode != 0:
        subprocess.run(["bash", str(SCRIPT), "stop"], env=env, capture_output=True, timeout=120)
        pytest.skip(f"multi-node Slurm did not start: {proc.stderr.strip()[-500:]}")
    env["SLURM_CONF"] = f"{BASE}/slurm.conf"
    try:
        yield env
    finally:
        subprocess.run(["bash", str(SCRIPT), "stop"], env=env, capture_output=True, timeout=120)


def _run_job(env, tmp_path, template: str, *args: str, timeout: float = 300.0):
    """Submit ``sbatch -N 2 --ntasks-per-node=2 TEMPLATE ARGS`` and wait: (exit code, log)."""
    out = tmp_path / "job.out"
    job_id = subprocess.run(["sbatch", "--parsable", "-N", "2", "--ntasks-per-node=2", "--ntasks=4",
                             f"--output={out}", template, *args], cwd=str(ROOT), env=env, capture_output=True,
                            text=True, check=True, timeout=60).stdout.strip().split(";")[0]
    deadline = time.time() + timeout
    while time.time() < deadline:
        info = subprocess.run(["scontrol", "show", "job", job_id], env=env, capture_output=True, text=True).stdout
        state = re.search(r"JobState=(\w+)", info)
        if state and state.group(1) not in ("PENDING", "RUNNING", "CONFIGURING", "COMPLETING"):
            code = re.search(r"\bExitCode=(\d+):(\d+)", info)
            return int(code.group(1)), out.read_text() if out.exists() else ""
        time.sleep(0.5)
    subprocess.run(["scancel", job_id], env=env)
    raise AssertionError(f"job {job_id} did not end in {timeout} s")


def test_collectives_template_runs_on_two_nodes(two_nodes, tmp_path):
    res = tmp_path / "c.h5"
    code, log = _run_job(two_nodes, tmp_path, "jobs/collectives.sbatch", "-a", "mpi,binary_tree_star,hierarchical",
                         "-b", "1K", "-e", "64K", "-f", "8", "-n", "5", "-w", "1", "--rounds", "1",
                         "--output", str(res))
    assert code == 0, log[-3000:]
    assert "ranks=4 hosts=2 " in log and "# Check: OK (0 wrong elements)" in log, log[-3000:]
    attrs = read_attrs(res)
    assert attrs["hostnames"] == "node1,node1,node2,node2"
    assert attrs["slurm_job_nodelist"] == "node[1-2]" and attrs["slurm_job_id"]


def test_fl_template_rank_vanishing_on_the_second_node_ends_the_job(two_nodes, tmp_path):
    """A rank of node2 vanishes (os._exit, as a crash would): every task on both nodes ends, the job's status
    is 1, the file failed (srun --kill-on-bad-exit's SIGTERM, or hpcbench's watch for vanished ranks, whichever
    comes first). Under mpiexec with several hosts the watch alone ends the job (tests/test_multihost.py)."""
    how = "exit"
    from hpcbench.results.status import file_status

    res = tmp_path / "fl.h5"
    t0 = time.time()
    code, log = _run_job(two_nodes, tmp_path, "jobs/fl.sbatch", "jobs/configs/digits.yaml", "--rounds", "400",
                         "--eval_interval", "50", "--progress", "false", "--output", str(res),
                         "--fault-inject", f"3:3:{how}")
    assert code == 1 and "fault injected on rank 3" in log, (code, log[-3000:])
    assert time.time() - t0 < 120
    assert file_status(res).state == "failed"
    assert read_attrs(res)["hostnames"] == "node1,node1,node2,node2"


REPRODUCE = """
version: 1
figures:
  tiny:
    title: two nodes
    paper: a fixture
    jobs:
      - id: cost
        runner: costmodel
        ranks: 2
        overrides: {links: 10Gbit, alphas: 1e-5, sizes-mb: "0.1", algorithms: ring, reps: 1}
        expected_s: 3
    analysis: {script: analysis/plot_costmodel.py}
"""


def test_reproduce_spreads_a_run_over_both_nodes(two_nodes, tmp_path):
    """``hpcbench reproduce --launcher slurm --nodes 2``: the 2-rank run is submitted with ``--nodes=2`` and its
    ranks run one on each node (the file's host names), the figure is drawn."""
    manifest = tmp_path / "m.yaml"
    manifest.write_text(REPRODUCE)
    out = tmp_path / "out"
    proc = subprocess.run([sys.executable, "-m", "hpcbench.cli", "reproduce", "--manifest", str(manifest), "--out",
                           str(out), "--launcher", "slurm", "--nodes", "2"], cwd=str(ROOT), env=two_nodes,
                          capture_output=True, text=True, timeout=600, stdin=subprocess.DEVNULL)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "#SBATCH --nodes=2" in (out / "slurm" / "tiny" / "cost.sbatch").read_text()
    attrs = read_attrs(out / "runs" / "tiny" / "cost.h5")
    assert attrs["hostnames"] == "node1,node2" and attrs["slurm_job_nodelist"] == "node[1-2]"
    assert (out / "figures" / "tiny.png").is_file()

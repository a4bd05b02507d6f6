"""``nodes`` in ``hpcbench reproduce``: a manifest's ``nodes:`` and ``--nodes N`` spread a run's ranks over nodes
(``sbatch --nodes``; the local launcher: emulated hosts). Without launching; the runs themselves are in
tests/test_slurm_multinode.py (two Slurm nodes) and tests/test_reproduce_run.py."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from hosttools import hosts_or_skip
from hpcbench.reproduce.command import main
from hpcbench.reproduce.manifest import ManifestError, load_manifest
from hpcbench.reproduce.plan import make_plan
from hpcbench.reproduce.slurm import SlurmLauncher
from hpcbench.results import read_attrs
from mpitools import ROOT

MANIFEST = """
version: 1
figures:
  tiny:
    title: fixture
    paper: a fixture
    jobs:
      - id: cost
        runner: costmodel
        ranks: 4
        overrides: {links: 10Gbit, alphas: 1e-5, sizes-mb: "0.1", algorithms: ring, reps: 1}
        expected_s: 3
        points:
          - {name: spread, nodes: 2}
          - {name: uneven, ranks: 5, nodes: 2}
          - {name: free}
          - {name: one, ranks: 1}
    analysis: {script: analysis/plot_costmodel.py}
"""


def _plan(tmp_path: Path, text: str = MANIFEST, nodes=None):
    path = tmp_path / "m.yaml"
    path.write_text(textwrap.dedent(text))
    return make_plan(load_manifest(path), "quick", tmp_path / "out", nodes=nodes)


def test_nodes_come_from_the_point_the_job_or_the_command_line(tmp_path):
    runs = {r.name: r for r in _plan(tmp_path).runs}
    assert {k: r.nodes for k, r in runs.items()} == {"cost-spread": 2, "cost-uneven": 2, "cost-free": None,
                                                     "cost-one": None}
    assert runs["cost-spread"].ranks_per_node == (2, 2) and runs["cost-uneven"].ranks_per_node == (3, 2)
    assert runs["cost-free"].ranks_per_node == (4,)
    runs = {r.name: r for r in _plan(tmp_path, nodes=3).runs}
    assert runs["cost-free"].nodes == 3 and runs["cost-one"].nodes == 1 and runs["cost-spread"].nodes == 2


def test_nodes_enter_the_recipe_only_above_one(tmp_path):
    runs = {r.name: r for r in _plan(tmp_path).runs}
    free = runs["cost-free"]
    before = free.recipe({})
    free.nodes = 1
    assert free.recipe({}) == before      # files made before nodes existed stay up to date on one node
    free.nodes = 2
    assert free.recipe({}) != before


def test_more_nodes_than_ranks_is_refused_naming_nodes(tmp_path):
    bad = MANIFEST.replace("{name: spread, nodes: 2}", "{name: spread, ranks: 2, nodes: 3}")
    with pytest.raises(ManifestError, match="nodes: 3 nodes for 2 ranks"):
        _plan(tmp_path, bad)


def test_slurm_script_asks_for_the_nodes(tmp_path, monkeypatch):
    launcher = object.__new__(SlurmLauncher)       # no controller needed to write the scripts
    launcher.python, launcher.out, launcher.exclusive, launcher.sbatch_args = "py", tmp_path / "out", True, []
    monkeypatch.setattr(SlurmLauncher, "_submit", lambda self, script, *a: script)
    runs = {r.name: r for r in _plan(tmp_path).runs}
    header = {name: [line for line in launcher.start_run(runs[name], ["-m", "x"]).read_text().splitlines()
                     if line.startswith("#SBATCH")] for name in ("cost-spread", "cost-uneven", "cost-free")}
    assert "#SBATCH --nodes=2" in header["cost-spread"] and "#SBATCH --ntasks-per-node=2" in header["cost-spread"]
    assert "#SBATCH --nodes=2" in header["cost-uneven"]
    assert not any("ntasks-per-node" in h for h in header["cost-uneven"])
    assert not any("--nodes" in h for h in header["cost-free"])


def test_bad_nodes_on_the_command_line_is_a_usage_error(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["--nodes", "0", "--list"])
    assert exc.value.code == 2 and "--nodes" in capsys.readouterr().err


@pytest.mark.mpi
def test_local_launcher_runs_a_spread_run_on_emulated_hosts(tmp_path):
    """``--launcher local --nodes 2``: the 2-rank run's ranks sit on two emulated hosts (the file's host names)."""
    hosts_or_skip()
    manifest = tmp_path / "m.yaml"
    manifest.write_text(textwrap.dedent(MANIFEST).split("        points:")[0].replace("ranks: 4", "ranks: 2")
                        + "    analysis: {script: analysis/plot_costmodel.py}\n")
    out = tmp_path / "out"
    proc = subprocess.run([sys.executable, "-m", "hpcbench.cli", "reproduce", "--manifest", str(manifest), "--out",
                           str(out), "--nodes", "2"], cwd=str(ROOT), capture_output=True, text=True, timeout=600,
                          stdin=subprocess.DEVNULL)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert read_attrs(out / "runs" / "tiny" / "cost.h5")["hostnames"] == "node0,node1"

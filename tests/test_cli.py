"""The ``hpcbench`` console command: lists every runner and dispatches to each."""

from __future__ import annotations

import subprocess
import sys

import pytest

from hpcbench.cli import SUBCOMMANDS
from mpitools import ROOT


def _hpcbench(*args, timeout=180):
    return subprocess.run([sys.executable, "-m", "hpcbench.cli", *args], capture_output=True, text=True,
                          timeout=timeout, cwd=str(ROOT), stdin=subprocess.DEVNULL)


def test_lists_every_runner():
    proc = _hpcbench("--help")
    assert proc.returncode == 0, proc.stderr
    for name, sub in SUBCOMMANDS.items():
        assert name in proc.stdout and sub.help in proc.stdout
    for runner in ("fl", "fl-bench", "collectives", "compress"):
        assert runner in SUBCOMMANDS


def test_no_subcommand_and_unknown_subcommand_exit_2():
    proc = _hpcbench()
    assert proc.returncode == 2 and "subcommands" in proc.stdout
    proc = _hpcbench("no-such-runner")
    assert proc.returncode == 2 and "no-such-runner" in proc.stderr


@pytest.mark.parametrize("name", sorted(SUBCOMMANDS))
def test_each_subcommand_has_help(name):
    proc = _hpcbench(name, "--help")
    assert proc.returncode == 0, f"{name}: rc={proc.returncode}\n{proc.stderr[-2000:]}"
    assert "usage:" in proc.stdout


@pytest.mark.parametrize("name,keys", [("train", ["--schedule (default 'fifo')", "--profile_file", "--link.bandwidth"]),
                                       ("fl", ["--client_training", "--selection.name"])])
def test_runner_help_lists_every_config_key_with_its_default(name, keys):
    proc = _hpcbench(name, "--help")
    assert proc.returncode == 0
    for key in keys:
        assert key in proc.stdout, key


def test_fl_subcommand_runs_a_job(tmp_path):
    out = tmp_path / "fl.h5"
    proc = _hpcbench("fl", "jobs/configs/digits.yaml", "--rounds", "2", "--progress", "false",
                     "--output", str(out))
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert out.is_file() and "results:" in proc.stdout
    proc = _hpcbench("fl", "jobs/configs/digits.yaml", "--rounds", "-1", "--output", str(tmp_path / "x.h5"))
    assert proc.returncode == 2 and "rounds" in proc.stderr


def _python_with_flower(folder) -> str:
    """An interpreter that imports flwr and ray (empty stand-ins): passes fl-bench's --flower check, runs nothing."""
    for name in ("flwr", "ray"):
        (folder / name).mkdir()
        (folder / name / "__init__.py").write_text("")
    wrapper = folder / "python"
    wrapper.write_text(f'#!/bin/sh\nPYTHONPATH="{folder}:$PYTHONPATH" exec "{sys.executable}" "$@"\n')
    wrapper.chmod(0o755)
    return str(wrapper)


def test_fl_bench_runs_and_checks_the_flower_task_after_the_first_job(tmp_path):
    small = ("--np", "1", "--clients", "60", "--participants", "6", "--rounds", "3", "--warmup", "1",
             "--registry-clients", "0")
    proc = _hpcbench("fl-bench", *small, "--flower", "none", "--client-training", "numpy,sequential")
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "60 registered clients, 6 participants/round" in proc.stdout and "Flower" not in proc.stdout
    rows = [line.split() for line in proc.stdout.splitlines() if line.startswith("   1 ")]
    assert [r[1] for r in rows] == ["numpy", "sequential"]  # the first engine first, the other beside it
    assert float(rows[0][-2]) < float(rows[1][-2])  # tree RSS: the numpy engine's ranks do not hold torch
    proc = _hpcbench("fl-bench", *small, "--flower", "none", "--repeats", "0")
    assert proc.returncode == 2 and "--repeats" in proc.stderr and "running" not in proc.stdout, proc.stderr
    # the preset's flags go to the jobs, and are checked with them: a bad override exits 2 before any launch
    proc = _hpcbench("fl-bench", *small, "--flower", "none", "--preset", "flower-digits", "--model.hidden", "0")
    assert proc.returncode == 2 and "hidden" in proc.stderr and "running" not in proc.stdout, proc.stderr
    for bad in (["--client-training", "numpy,vmap"], ["--client_training", "numpy"]):
        proc = _hpcbench("fl-bench", *small, "--flower", "none", *bad)
        assert proc.returncode == 2 and "client" in proc.stderr and "running" not in proc.stdout, proc.stderr
    # a job the Flower side would not reproduce: refused by name before any Flower run
    proc = _hpcbench("fl-bench", *small, "--flower", _python_with_flower(tmp_path), "--momentum", "0.5")
    assert proc.returncode == 2 and "momentum" in proc.stderr, proc.stderr[-2000:]
    assert "running Flower" not in proc.stdout

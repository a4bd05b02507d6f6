"""Jobs on emulated hosts for pytest (:mod:`hpcbench.runtime.emulated_hosts`): skipped, with the reason, where
namespaces are not permitted."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Sequence

import pytest

from hpcbench.runtime import launch
from hpcbench.runtime.emulated_hosts import unavailable_reason
from mpitools import ROOT, mpiexec_path


def hosts_or_skip() -> None:
    """Skip the test where hosts cannot be emulated (not root, no namespaces, no Hydra ``mpiexec``)."""
    mpiexec_path()
    why = unavailable_reason()
    if why:
        pytest.skip(f"emulated hosts unavailable: {why}")


def run_on_hosts(hosts: Sequence[int], args: list[str], timeout: float = 300, cwd: Path | None = None,
                 env: dict | None = None) -> subprocess.CompletedProcess:
    """``python ARGS`` on emulated hosts of ``hosts[i]`` ranks each (``(2, 2)``, ``(3, 1)``); a timeout fails the
    test with the output. ``HPCBENCH_TEST_HOSTS`` tells the job the layout (``2,2``)."""
    hosts_or_skip()
    env = {"HPCBENCH_TEST_HOSTS": ",".join(str(int(k)) for k in hosts), **(env or {})}
    try:
        return launch.run_mpi(sum(hosts), args, timeout=timeout, cwd=cwd or ROOT, env=env, hosts=hosts)
    except launch.LaunchTimeout as exc:
        raise AssertionError(f"{exc}\nstdout:\n{exc.stdout}\nstderr:\n{exc.stderr}") from None


@pytest.fixture
def on_hosts():
    """:func:`run_on_hosts` as a fixture (skips where hosts cannot be emulated)."""
    hosts_or_skip()
    return run_on_hosts

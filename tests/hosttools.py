"""Jobs on emulated hosts for pytest (:mod:`hpcbench.runtime.emulated_hosts`): skipped, with the reason, where
namespaces are not permitted."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path
from typing import Sequence

import pytest

from hpcbench.runtime import emulated_net, launch
from hpcbench.runtime.emulated_hosts import unavailable_reason
from mpitools import ROOT, mpiexec_path


def hosts_or_skip() -> None:
    """Skip the test where hosts cannot be emulated (not root, no namespaces, no Hydra ``mpiexec``)."""
    mpiexec_path()
    why = unavailable_reason()
    if why:
        pytest.skip(f"emulated hosts unavailable: {why}")


def network_or_skip() -> None:
    """Skip where emulated hosts cannot have a network of their own (not root, no network namespaces, no
    iproute2: :func:`hpcbench.runtime.emulated_net.unavailable_reason`)."""
    hosts_or_skip()
    why = emulated_net.unavailable_reason()
    if why:
        pytest.skip(f"emulated network unavailable: {why}")


def leftovers(pid: int) -> list[str]:
    """Network namespaces and interfaces of the emulated networks made by process ``pid`` that still exist."""
    names = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout.split()
    names += [line.split(":")[1].strip().split("@")[0]
              for line in subprocess.run(["ip", "-o", "link", "show"], capture_output=True, text=True).stdout
              .splitlines()]
    return [n for n in names if re.match(rf"(hpcb|hb){int(pid)}[a-z]", n)]


def run_on_hosts(hosts: Sequence[int], args: list[str], timeout: float = 300, cwd: Path | None = None,
                 env: dict | None = None, link: str | None = None) -> subprocess.CompletedProcess:
    """``python ARGS`` on emulated hosts of ``hosts[i]`` ranks each (``(2, 2)``, ``(3, 1)``); a timeout fails the
    test with the output. ``HPCBENCH_TEST_HOSTS`` tells the job the layout (``2,2``). ``link``: the hosts in
    network namespaces joined by that link (``"rate=1gbit"``; ``launch.run_mpi``'s ``link``)."""
    hosts_or_skip()
    if link is not None:
        network_or_skip()
    env = {"HPCBENCH_TEST_HOSTS": ",".join(str(int(k)) for k in hosts), **(env or {})}
    try:
        return launch.run_mpi(sum(hosts), args, timeout=timeout, cwd=cwd or ROOT, env=env, hosts=hosts, link=link)
    except launch.LaunchTimeout as exc:
        raise AssertionError(f"{exc}\nstdout:\n{exc.stdout}\nstderr:\n{exc.stderr}") from None


@pytest.fixture
def on_hosts():
    """:func:`run_on_hosts` as a fixture (skips where hosts cannot be emulated)."""
    hosts_or_skip()
    return run_on_hosts

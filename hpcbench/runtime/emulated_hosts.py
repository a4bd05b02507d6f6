"""Emulated hosts on one machine: an MPICH Hydra launch whose ranks sit on several named hosts.

Hydra starts one proxy per host through ``ssh``; with
``-launcher ssh -launcher-exec`` :mod:`hpcbench.runtime.emulated_ssh` takes
ssh's place and starts each proxy, on this machine, in a UTS namespace
named after its host. The ranks of each host then share a host name (and
``MPI_COMM_TYPE_SHARED`` groups them), ranks of different hosts talk
through MPICH's network module, and every node-aware path of hpcbench
(executors per node, datasets per node, ``binary_tree_star``, the
hierarchical allreduce, ``hosts`` in the provenance) runs as on a cluster.
See docs/running.md, "Running on several nodes".
"""

from __future__ import annotations

import os
import shutil
import subprocess
from functools import lru_cache
from pathlib import Path
from typing import Sequence

__all__ = ["launcher_path", "host_names", "hosts_argument", "mpiexec_arguments", "unavailable_reason"]


def launcher_path() -> str:
    """Path of the executable ``ssh`` stand-in (:mod:`hpcbench.runtime.emulated_ssh`)."""
    return str(Path(__file__).with_name("emulated_ssh.py"))


def host_names(count: int, prefix: str = "node") -> list[str]:
    """``count`` host names: ``node0``, ``node1``, ...

    Raises
    ------
    ValueError
        ``count`` below 1.
    """
    if int(count) < 1:
        raise ValueError(f"hosts: need at least one host, got {count}")
    return [f"{prefix}{i}" for i in range(int(count))]


def hosts_argument(ranks_per_host: Sequence[int], names: Sequence[str] | None = None) -> str:
    """Hydra's ``-hosts`` value: ``node0:2,node1:2`` for ``ranks_per_host=(2, 2)``.

    Hydra fills the hosts in order, each up to its count, so ranks
    ``0..k0-1`` run on the first host, the next ``k1`` on the second, and so on.

    Parameters
    ----------
    ranks_per_host : sequence of int
        Ranks of each host, each >= 1 (``(3, 1)``: an uneven layout).
    names : sequence of str, optional
        The host names (default :func:`host_names`).

    Raises
    ------
    ValueError
        An empty layout, a count below 1, or names not matching it.
    """
    counts = [int(k) for k in ranks_per_host]
    if not counts or min(counts) < 1:
        raise ValueError(f"hosts: every host needs at least one rank, got {list(ranks_per_host)}")
    names = list(names) if names is not None else host_names(len(counts))
    if len(names) != len(counts) or len(set(names)) != len(names):
        raise ValueError(f"hosts: {len(counts)} distinct names needed, got {names}")
    return ",".join(f"{h}:{k}" for h, k in zip(names, counts))


def mpiexec_arguments(ranks_per_host: Sequence[int], names: Sequence[str] | None = None) -> list[str]:
    """Arguments for Hydra's ``mpiexec`` (before ``-n``) that place ranks on emulated hosts.

    Examples
    --------
    >>> mpiexec_arguments([2, 2])[:2], mpiexec_arguments([2, 2])[-2:]
    (['-launcher', 'ssh'], ['-hosts', 'node0:2,node1:2'])
    """
    return ["-launcher", "ssh", "-launcher-exec", launcher_path(), "-hosts", hosts_argument(ranks_per_host, names)]


@lru_cache(maxsize=1)
def unavailable_reason() -> str:
    """Why hosts cannot be emulated here, or ``""`` when they can.

    Tries what :mod:`~hpcbench.runtime.emulated_ssh` does: ``unshare --uts
    --mount`` and setting a host name inside (root, or a kernel and
    container that allow these namespaces); and the launcher must be
    executable. The answer is cached for the process.
    """
    if shutil.which("unshare") is None:
        return "no 'unshare' command (util-linux)"
    if not os.access(launcher_path(), os.X_OK):
        return f"{launcher_path()} is not executable"
    try:
        proc = subprocess.run(["unshare", "--uts", "--mount", "--propagation", "private", "/bin/sh", "-c",
                               "hostname hpcbench-probe && [ \"$(hostname)\" = hpcbench-probe ]"],
                              capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"unshare failed: {exc}"
    if proc.returncode != 0:
        why = (proc.stderr.strip().splitlines() or [f"exit status {proc.returncode}"])[-1]
        return f"UTS/mount namespaces not permitted here ({why})"
    return ""

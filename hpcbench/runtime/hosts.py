"""Which ranks share a host: the one host-grouping helper of the project.

Every runner and core module that needs to know which ranks run on the same
node (hierarchical collectives, the FL executors' per-node concurrency,
gloo's rendezvous address, provenance) asks here, over the communicator it
works on; nothing caches the answer at module level, so two communicators
never share (or overwrite) each other's grouping.
"""

from __future__ import annotations

import os
import socket
from typing import Iterable, Sequence

__all__ = ["hostname", "gather_hostnames", "gather_cores", "gather_machines", "machine_labels", "oversubscription",
           "group_ranks", "host_groups", "single_host"]


def hostname() -> str:
    """This process's host name (``socket.gethostname()``)."""
    return socket.gethostname()


def gather_hostnames(comm) -> list[str]:
    """Host name of every rank of ``comm``, in rank order (collective: one ``allgather``)."""
    return comm.allgather(hostname())


def gather_cores(comm) -> list[int]:
    """Cores of each rank's host (``os.cpu_count()``), in rank order (collective: one ``allgather``)."""
    return comm.allgather(int(os.cpu_count() or 1))


def _boot_id() -> str:
    """This kernel's boot id (``/proc/sys/kernel/random/boot_id``), ``""`` where it cannot be read."""
    try:
        with open("/proc/sys/kernel/random/boot_id", encoding="ascii") as f:
            return f.read().strip()
    except OSError:
        return ""


def machine_labels(names: Sequence[str], boot_ids: Sequence[str]) -> list[str]:
    """Per rank, a label of the machine it runs on: its host names joined by ``+``.

    Hosts emulated on one machine (``hpcbench.runtime.emulated_hosts``) have
    their own names but one kernel, so one boot id, and share its cores; a
    rank whose boot id is unknown (``""``) is its host alone.

    Examples
    --------
    >>> machine_labels(["node0", "node0", "node1"], ["b", "b", "b"])
    ['node0+node1', 'node0+node1', 'node0+node1']
    >>> machine_labels(["a", "b"], ["x", ""])
    ['a', 'b']
    """
    hosts: dict[str, set] = {}
    for name, boot in zip(names, boot_ids):
        if boot:
            hosts.setdefault(boot, set()).add(name)
    return ["+".join(sorted(hosts[boot])) if boot else name for name, boot in zip(names, boot_ids)]


def gather_machines(comm) -> list[str]:
    """:func:`machine_labels` of every rank of ``comm``, in rank order (collective: one ``allgather``)."""
    everyone = comm.allgather((hostname(), _boot_id()))
    return machine_labels([n for n, _ in everyone], [b for _, b in everyone])


def oversubscription(names: Sequence[str], cores: Sequence[int]) -> str:
    """Hosts running more ranks than they have cores, as one line, or ``""`` when none does.

    Parameters
    ----------
    names : sequence of str
        Host (or machine: :func:`gather_machines`) of every rank.
    cores : sequence of int
        Cores of every rank's host (:func:`gather_cores`).

    Returns
    -------
    str
        ``"HOST: 4 ranks on 2 cores"`` per oversubscribed host, joined by ``"; "``.
    """
    ranks: dict[str, int] = {}
    for name in names:
        ranks[name] = ranks.get(name, 0) + 1
    host_cores = dict(zip(names, cores))
    return "; ".join(f"{h}: {n} ranks on {host_cores[h]} cores" for h, n in ranks.items() if n > host_cores[h])


def group_ranks(names: Sequence[str], ranks: Iterable[int] | None = None) -> list[list[int]]:
    """Ranks grouped by host name, groups ordered by their lowest rank.

    Parameters
    ----------
    names : sequence of str
        Host name of every rank, indexed by rank (from :func:`gather_hostnames`).
    ranks : iterable of int, optional
        Only these ranks, in this order (default: all of ``names``).

    Returns
    -------
    list of list of int
        One list per host, ranks in the order given; hosts in the order of their
        first rank.
    """
    groups: dict[str, list[int]] = {}
    for r in range(len(names)) if ranks is None else ranks:
        groups.setdefault(names[r], []).append(r)
    return list(groups.values())


def host_groups(comm) -> list[list[int]]:
    """Ranks of ``comm`` grouped by host (collective); see :func:`group_ranks`."""
    return group_ranks(gather_hostnames(comm))


def single_host(comm) -> bool:
    """True when every rank of ``comm`` runs on one host (collective)."""
    return len(set(gather_hostnames(comm))) == 1

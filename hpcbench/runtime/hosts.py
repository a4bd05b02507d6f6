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

__all__ = ["hostname", "gather_hostnames", "gather_cores", "oversubscription", "group_ranks", "host_groups",
           "single_host"]


def hostname() -> str:
    """This process's host name (``socket.gethostname()``)."""
    return socket.gethostname()


def gather_hostnames(comm) -> list[str]:
    """Host name of every rank of ``comm``, in rank order (collective: one ``allgather``)."""
    return comm.allgather(hostname())


def gather_cores(comm) -> list[int]:
    """Cores of each rank's host (``os.cpu_count()``), in rank order (collective: one ``allgather``)."""
    return comm.allgather(int(os.cpu_count() or 1))


def oversubscription(names: Sequence[str], cores: Sequence[int]) -> str:
    """Hosts running more ranks than they have cores, as one line, or ``""`` when none does.

    Parameters
    ----------
    names : sequence of str
        Host name of every rank (:func:`gather_hostnames`).
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

"""Gradient synchronisers for data-parallel training, chosen by name.

:data:`SYNCHRONISERS` maps each name to its class, one line per synchroniser
module; every allreduce algorithm of :mod:`hpcbench.collectives.algorithms`
(and ``auto``) is a synchroniser of its own through
:mod:`hpcbench.sync.collective`, so a new algorithm needs no line here.
Configs read the names and each class's config section from the registry.
No module here imports torch when it is imported (an emulated rank never
needs it): synchronisers that need torch import it when built.
"""

from __future__ import annotations

from hpcbench.collectives import algorithm_names
from hpcbench.runtime.registry import Registry
from hpcbench.sync.base import Synchroniser, SyncConfig, Unavailable
from hpcbench.sync.collective import for_algorithm
from hpcbench.sync.compressed import CompressedSync
from hpcbench.sync.ddp import DDPSync
from hpcbench.sync.horovod import HorovodSync
from hpcbench.sync.mpi import MPISync
from hpcbench.sync.nccl import NCCLSync
from hpcbench.sync.pair import PairSync
from hpcbench.sync.sma import SMASync

__all__ = ["Synchroniser", "SyncConfig", "Unavailable", "SYNCHRONISERS", "names", "get", "build"]

#: synchroniser name -> class: MPI's own allreduce, hpcbench's algorithms and ``auto``, then the rest
SYNCHRONISERS: Registry[type[Synchroniser]] = Registry("synchroniser", [
    ("mpi", MPISync),
    *((a, for_algorithm(a)) for a in [*algorithm_names(), "auto"]),
    ("horovod", HorovodSync),
    ("ddp", DDPSync),
    ("nccl", NCCLSync),
    ("compressed", CompressedSync),
    ("sma", SMASync),
    ("pair", PairSync),
])


def names() -> list[str]:
    """Every synchroniser name, in :data:`SYNCHRONISERS` order."""
    return list(SYNCHRONISERS)


def get(name: str) -> type[Synchroniser]:
    """The class of synchroniser ``name``.

    Raises
    ------
    hpcbench.runtime.registry.UnknownName
        Unknown name (the message lists the registered ones).
    """
    return SYNCHRONISERS[name]


def build(entry, comm, transport=None, *, bucket_bytes: int = 25 << 20, seed: int = 0, device=None) -> Synchroniser:
    """Construct a synchroniser (collective over ``comm``).

    Parameters
    ----------
    entry : str or SyncConfig
        A registered name (its defaults), or a ``sync`` entry's section
        (``name`` and the class's own keys).
    comm : mpi4py.MPI.Comm
    transport : hpcbench.collectives.transport.Transport, optional
    bucket_bytes, seed : int
        The job's gradient bucket capacity (bytes) and seed.
    device : hpcbench.runtime.device.Device, optional
        This rank's device (default: the CPU).

    Raises
    ------
    hpcbench.runtime.registry.UnknownName
        Unknown name.
    Unavailable
        It cannot run here (the message says why).
    """
    facts = dict(bucket_bytes=bucket_bytes, seed=seed, device=device)
    if isinstance(entry, str):
        return get(entry)(comm, transport, None, **facts)
    return get(entry.name)(comm, transport, entry, **facts)

"""Gradient synchronisers for data-parallel training, chosen by name.

One module per synchroniser in :data:`_MODULES`; every allreduce algorithm of
:mod:`hpcbench.collectives.algorithms` (and ``auto``) is a synchroniser of its
own through :mod:`hpcbench.sync.collective`, so a new algorithm needs no line
here. Configs validate names against :func:`names`.
"""

from __future__ import annotations

import importlib

from hpcbench.runtime.registry import Registry
from hpcbench.sync.base import Synchroniser, SyncOptions, Unavailable

__all__ = ["Synchroniser", "SyncOptions", "Unavailable", "names", "get", "build", "registry"]

#: synchroniser name -> module defining its class as ``SYNCHRONISER``
_MODULES: dict[str, str] = {
    "mpi": "hpcbench.sync.mpi",
    "horovod": "hpcbench.sync.horovod",
    "ddp": "hpcbench.sync.ddp",
    "compressed": "hpcbench.sync.compressed",
    "sma": "hpcbench.sync.sma",
    "pair": "hpcbench.sync.pair",
}
_COLLECTIVE = "hpcbench.sync.collective"


def registry() -> Registry[str]:
    """Synchroniser name -> the module defining it: ``mpi``, hpcbench's allreduce algorithms and ``auto``
    (all :mod:`hpcbench.sync.collective`), then the rest of :data:`_MODULES`."""
    from hpcbench.collectives import algorithm_names

    collective = [(a, _COLLECTIVE) for a in [*algorithm_names(), "auto"]]
    return Registry("synchroniser", [("mpi", _MODULES["mpi"]), *collective,
                                     *((n, m) for n, m in _MODULES.items() if n != "mpi")])


def names() -> list[str]:
    """Every synchroniser name, in :func:`registry` order."""
    return list(registry())


def get(name: str) -> type[Synchroniser]:
    """The class of synchroniser ``name``.

    Raises
    ------
    hpcbench.runtime.registry.UnknownName
        Unknown name (the message lists the registered ones).
    """
    module = importlib.import_module(registry()[name])
    if name in _MODULES:
        return module.SYNCHRONISER
    return module.for_algorithm(name)


def build(name: str, comm, transport=None, options: SyncOptions = SyncOptions()) -> Synchroniser:
    """Construct synchroniser ``name`` (collective over ``comm``).

    Raises
    ------
    hpcbench.runtime.registry.UnknownName
        Unknown name.
    Unavailable
        It cannot run here (the message says why).
    """
    return get(name)(comm, transport, options)

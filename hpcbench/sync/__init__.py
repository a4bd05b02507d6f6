"""Gradient synchronisers for data-parallel training, chosen by name.

One module per synchroniser in :data:`_MODULES`; every allreduce algorithm of
:mod:`hpcbench.collectives.algorithms` (and ``auto``) is a synchroniser of its
own through :mod:`hpcbench.sync.collective`, so a new algorithm needs no line
here. Configs validate names against :func:`names`.
"""

from __future__ import annotations

import importlib

from hpcbench.sync.base import Synchroniser, SyncOptions, Unavailable

__all__ = ["Synchroniser", "SyncOptions", "Unavailable", "names", "get", "build"]

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


def names() -> list[str]:
    """Every synchroniser name: ``mpi``, hpcbench's allreduce algorithms and ``auto``, then the rest."""
    from hpcbench.collectives import algorithm_names

    return ["mpi", *algorithm_names(), "auto", *[n for n in _MODULES if n != "mpi"]]


def get(name: str) -> type[Synchroniser]:
    """The class of synchroniser ``name``.

    Raises
    ------
    ValueError
        Unknown name (the message lists the registered ones).
    """
    if name not in names():
        raise ValueError(f"unknown synchroniser {name!r}; choose from {', '.join(names())}")
    module = importlib.import_module(_MODULES.get(name, _COLLECTIVE))
    if name in _MODULES:
        return module.SYNCHRONISER
    return module.for_algorithm(name)


def build(name: str, comm, transport=None, options: SyncOptions = SyncOptions()) -> Synchroniser:
    """Construct synchroniser ``name`` (collective over ``comm``).

    Raises
    ------
    ValueError
        Unknown name.
    Unavailable
        It cannot run here (the message says why).
    """
    return get(name)(comm, transport, options)

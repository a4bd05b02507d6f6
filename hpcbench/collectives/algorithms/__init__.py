"""Registry of allreduce algorithms: one module per algorithm, selected by name.

Every algorithm is a generator function::

    gen(tr, tag, src, dst, red, ctx, **options)

with ``tr`` a :class:`~hpcbench.collectives.transport.Transport`, ``tag`` the
operation's MPI tag, ``src``/``dst`` flat numpy arrays of the same dtype and
length (``dst is src`` for in-place), ``red`` a
:class:`~hpcbench.collectives._core.Reducer` and ``ctx`` the communicator's
:class:`~hpcbench.collectives._core.Context`. It yields lists of point-to-point
requests to wait for and, once exhausted, leaves the result in ``dst`` on every
rank. The same generator is driven inline (blocking calls) or by the progress
engine (nonblocking calls).

An algorithm may also have a *schedule* (:func:`register_schedule`): its
messages and reductions on one rank as a list of
:class:`~hpcbench.collectives.persistent.Step`, which the blocking
``allreduce`` binds once to a call's buffers as persistent MPI requests and
replays (:mod:`hpcbench.collectives.persistent`). It must send the same
messages in the same order and evaluate the same reduction expressions as the
generator (so the same result bits, and a rank running the generator matches
a rank running the plan)::

    schedule(n, rank, count, itemsize, inplace) -> list[Step] | None

with ``n`` the world size (> 1), ``count`` elements (> 0) of ``itemsize``
bytes, ``inplace`` when ``src`` and ``dst`` are the same memory. None: the
generator runs (e.g. the ring with blocks of more than one segment).

Every algorithm also has a *cost model* (:func:`register_cost`), its
alpha-beta-gamma time over the link model of
:mod:`hpcbench.collectives.linkmodel`, read by
:func:`hpcbench.collectives.cost.predict_allreduce`::

    cost(nbytes, p, alpha, beta, gamma, local_size=None) -> seconds
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Callable

from hpcbench.runtime.registry import Registry

__all__ = ["Algorithm", "register", "register_schedule", "register_cost", "get", "find", "names",
           "ALGORITHMS"]


@dataclass(frozen=True)
class Algorithm:
    """A registered allreduce algorithm.

    Attributes
    ----------
    name : str
        Registry name (``allreduce(x, algorithm=name)``).
    fn : callable
        The generator function.
    deterministic : bool
        True when every element is reduced at exactly one rank in an order
        fixed by the ranks alone, and the reduced bytes are copied to the
        others (so results are bitwise identical on all ranks and across runs).
    description : str
        One line with the reference.
    schedule : callable or None
        The schedule of blocking calls on small buffers (see module
        docstring), or None.
    cost : callable or None
        The alpha-beta-gamma cost model (see module docstring).
    """

    name: str
    fn: Callable
    deterministic: bool
    description: str
    schedule: Callable | None = None
    cost: Callable | None = None


ALGORITHMS: Registry[Algorithm] = Registry("allreduce algorithm")


def register(name: str, deterministic: bool, description: str):
    """Decorator adding a generator function to :data:`ALGORITHMS`."""
    def deco(fn):
        ALGORITHMS[name] = Algorithm(name, fn, deterministic, description)
        return fn
    return deco


def register_schedule(name: str):
    """Decorator attaching a schedule builder to the registered algorithm ``name``."""
    def deco(fn):
        ALGORITHMS[name] = replace(ALGORITHMS[name], schedule=fn)
        return fn
    return deco


def register_cost(name: str):
    """Decorator attaching a cost model to the registered algorithm ``name``."""
    def deco(fn):
        ALGORITHMS[name] = replace(ALGORITHMS[name], cost=fn)
        return fn
    return deco


def get(name: str) -> Algorithm:
    """The algorithm called ``name``.

    Raises
    ------
    hpcbench.runtime.registry.UnknownName
        If no algorithm has that name (a ``ValueError``; the message lists the registered ones).
    """
    _load()
    return ALGORITHMS[name]


def find(name: str) -> Algorithm | None:
    """The algorithm called ``name``, or None (no error: for fast paths that fall back)."""
    _load()
    return ALGORITHMS.get(name)


def names() -> list[str]:
    """Names of every registered algorithm, in a stable order."""
    _load()
    order = ["ring", "rabenseifner", "recursive_doubling", "tree", "star", "binary_tree_star", "hierarchical",
             "weighted_shards"]
    return [n for n in order if n in ALGORITHMS] + sorted(set(ALGORITHMS) - set(order))


_loaded = False


def _load() -> None:
    global _loaded
    if not _loaded:
        from hpcbench.collectives.algorithms import (  # noqa: F401
            hierarchical, rabenseifner, recursive_doubling, ring, star, tree, tree_star, weighted_shards)
        _loaded = True

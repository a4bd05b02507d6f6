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

import functools

from hpcbench.collectives.algorithms.registry import (ALGORITHMS, Algorithm, register, register_cost,
                                                      register_links_cost, register_links_options,
                                                      register_schedule)

__all__ = ["Algorithm", "register", "register_schedule", "register_cost", "register_links_cost",
           "register_links_options", "get", "find", "names", "check_options", "section_of", "ALGORITHMS"]


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


def check_options(alg: Algorithm, options: dict, world_size: int) -> None:
    """Refuse, before any message, options ``alg`` does not declare (its ``Config``) or whose values do not fit
    ``world_size`` ranks (its ``check``).

    Raises
    ------
    ValueError
        Naming the option and the algorithm.
    """
    declared = [k for k in alg.Config.model_fields if k != "name"]
    for key in options:
        if key not in declared:
            raise ValueError(f"{key}: the {alg.name} allreduce algorithm takes no option {key!r} (its options: "
                             f"{', '.join(declared) or 'none'})")
    if alg.check is not None:
        alg.check(world_size, **options)


@functools.lru_cache(maxsize=4)
def _section(names_now: tuple):
    from pydantic import TypeAdapter

    from hpcbench.runtime.config import strategy_section

    return TypeAdapter(strategy_section(ALGORITHMS, "algorithm")[0])


def section_of(value):
    """An algorithm's section ``{name: NAME, ...its options}`` (or its name) validated by the algorithm's ``Config``.

    Raises
    ------
    ValueError
        ``algorithm: ...``: an unknown name (the registry's message, listing the algorithms), an option the
        algorithm does not declare, or a bad value.
    """
    from hpcbench.runtime.config import validate_section

    _load()
    return validate_section(_section(tuple(ALGORITHMS)), value, "algorithm")


_loaded = False


def _load() -> None:
    global _loaded
    if not _loaded:
        from hpcbench.collectives.algorithms import (  # noqa: F401
            hierarchical, rabenseifner, recursive_doubling, ring, star, tree, tree_star, weighted_shards)
        _loaded = True

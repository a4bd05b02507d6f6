"""The registry of allreduce algorithms and the decorators an algorithm's module registers itself with.

Apart from the package (:mod:`hpcbench.collectives.algorithms`), which imports the algorithms' modules when a
name is first looked up, so that those modules import this one and not the package that imports them.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Callable

from hpcbench.runtime.registry import Registry

__all__ = ["Algorithm", "ALGORITHMS", "register", "register_schedule", "register_cost"]


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

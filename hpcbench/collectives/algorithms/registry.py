"""The registry of allreduce algorithms and the decorators an algorithm's module registers itself with.

Apart from the package (:mod:`hpcbench.collectives.algorithms`), which imports the algorithms' modules when a
name is first looked up, so that those modules import this one and not the package that imports them.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Callable

from hpcbench.runtime.config import StrategyConfig
from hpcbench.runtime.registry import Registry

__all__ = ["Algorithm", "ALGORITHMS", "register", "register_schedule", "register_cost", "register_links_cost",
           "register_links_options"]


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
        docstring), or None: ``schedule(n, rank, count, itemsize, inplace)``,
        ``n`` the world size (the formulas' letter; docs/architecture.md, "Names").
    cost : callable or None
        The alpha-beta-gamma cost model (see module docstring):
        ``cost(nbytes, p, alpha, beta, gamma, local_size=None)``, ``p`` the
        world size as in Thakur, Rabenseifner and Gropp (2005).
    Config : type of StrategyConfig
        Its options (keywords of ``fn`` beyond the common ones), the base class for none: a config or a
        decision names the algorithm as a section ``{name: NAME, ...its options}``.
    check : callable or None
        ``check(world_size, **options)``: raises ``ValueError`` naming the option when its value does not
        fit ``world_size`` ranks, before any message is sent.
    links_cost : callable or None
        ``links_cost(nbytes, alpha, betas) -> seconds`` over links of different speeds (one ``beta`` per
        rank, :mod:`hpcbench.collectives.linkcost`); None: the cost model at the slowest link.
    links_options : callable or None
        ``links_options(betas) -> dict``: the options it takes for such links (as ``links_cost`` priced it).
    """

    name: str
    fn: Callable
    deterministic: bool
    description: str
    schedule: Callable | None = None
    cost: Callable | None = None
    Config: type[StrategyConfig] = StrategyConfig
    check: Callable | None = None
    links_cost: Callable | None = None
    links_options: Callable | None = None


ALGORITHMS: Registry[Algorithm] = Registry("allreduce algorithm")


def register(name: str, deterministic: bool, description: str, options: type[StrategyConfig] = StrategyConfig,
             check: Callable | None = None):
    """Decorator adding a generator function to :data:`ALGORITHMS`, with its options' section and their check."""
    def deco(fn):
        ALGORITHMS[name] = Algorithm(name, fn, deterministic, description, Config=options, check=check)
        return fn
    return deco


def _attach(name: str, field: str):
    def deco(fn):
        ALGORITHMS[name] = replace(ALGORITHMS[name], **{field: fn})
        return fn
    return deco


def register_schedule(name: str):
    """Decorator attaching a schedule builder to the registered algorithm ``name``."""
    return _attach(name, "schedule")


def register_cost(name: str):
    """Decorator attaching a cost model to the registered algorithm ``name``."""
    return _attach(name, "cost")


def register_links_cost(name: str):
    """Decorator attaching a cost over links of different speeds to the registered algorithm ``name``."""
    return _attach(name, "links_cost")


def register_links_options(name: str):
    """Decorator attaching the options for links of different speeds to the registered algorithm ``name``."""
    return _attach(name, "links_options")

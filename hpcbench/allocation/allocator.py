"""A registered layer allocator: its function and its options' config section.

An allocator is one file with ``allocate(instance, **options) -> Allocation`` and, when it takes options, a
``Config`` (a :class:`~hpcbench.runtime.config.StrategyConfig`) declaring them with their defaults; one line
of :data:`hpcbench.allocation.ALLOCATORS` registers ``Allocator(module.allocate, module.Config)``. A runner's
config takes an allocator as a section ``{name: NAME, ...its options}`` (built by
:func:`hpcbench.runtime.config.strategy_section`) and runs it with the section's options alone.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from hpcbench.allocation.instance import Allocation, Instance
from hpcbench.runtime.config import StrategyConfig

__all__ = ["Allocator"]


@dataclass(frozen=True)
class Allocator:
    """A layer allocator as the registry holds it.

    Attributes
    ----------
    allocate : callable
        ``allocate(instance, **options) -> Allocation``.
    Config : type of StrategyConfig
        Its options (keyword arguments of ``allocate``) with their defaults; the base class for none.
    """

    allocate: Callable[..., Allocation]
    Config: type[StrategyConfig] = StrategyConfig

    def __call__(self, inst: Instance, **options) -> Allocation:
        return self.allocate(inst, **options)


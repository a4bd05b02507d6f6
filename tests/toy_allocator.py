"""A toy layer allocator with an option, registered from the tests alone (no file of the package changes).

``front``: ``first`` layers on the first device, the rest split evenly over the others. Imported by
``tests/test_allocator_registry.py`` (in a fresh interpreter, before the pipeline's config is built).
"""

from __future__ import annotations

import numpy as np
from pydantic import Field, PositiveInt

from hpcbench.allocation import ALLOCATORS, Allocation, Allocator, Instance
from hpcbench.allocation.even import even_bounds
from hpcbench.runtime.config import StrategyConfig


class Config(StrategyConfig):
    """Options of ``front``."""

    first: PositiveInt = Field(1, description="layers on the first device")


def allocate(inst: Instance, first: int = 1) -> Allocation:
    """``first`` layers on device 0, the others' even split of the rest."""
    inst.check_shape()
    rest = even_bounds(inst.num_layers - first, inst.num_devices - 1) + first
    return Allocation(np.arange(inst.num_devices), np.concatenate([[0], rest]), "front")


ALLOCATORS.register("front", Allocator(allocate, Config))

"""Participant selection; ``SELECTORS`` maps the config's ``selection.name`` to a class."""

from hpcbench.fl.selection.oort import Oort
from hpcbench.fl.selection.random import RandomSelector
from hpcbench.runtime.registry import Registry

__all__ = ["SELECTORS", "RandomSelector", "Oort"]

#: selector name -> :class:`hpcbench.fl.contracts.Selector` subclass, built from its own config section
SELECTORS = Registry("selector", {
    "random": RandomSelector,
    "oort": Oort,
})

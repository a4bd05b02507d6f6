"""Participant selection; a registry maps ``selection`` to a class."""

from hpcbench.fl.selection.random import RandomSelector

__all__ = ["SELECTORS", "RandomSelector"]

#: selector name -> class constructed with the job's FLConfig
SELECTORS = {
    "random": RandomSelector,
}

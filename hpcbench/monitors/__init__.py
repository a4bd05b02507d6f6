"""Online training monitors (KungFu's gradient noise scale and gradient variance).

A registry maps a monitor's name to its class; a runner builds the monitors its
config names with :func:`build_monitor`. Add a monitor by adding
``monitors/NAME.py`` (a :class:`~hpcbench.monitors.base.Monitor`) and one line
in :data:`MONITORS`.
"""

from __future__ import annotations

from hpcbench.monitors.base import GradientView, Monitor

__all__ = ["MONITORS", "GradientView", "Monitor", "build_monitor"]

#: monitor name -> class
MONITORS: dict[str, type[Monitor]] = {}


def build_monitor(name: str, **options) -> Monitor:
    """The monitor registered as ``name``, built with ``options`` (e.g. ``interval``).

    Raises
    ------
    KeyError
        ``name`` is not registered (the message lists the registered names).
    """
    try:
        cls = MONITORS[name]
    except KeyError:
        raise KeyError(f"unknown monitor {name!r}; registered: {', '.join(sorted(MONITORS)) or 'none'}") from None
    return cls(**options)

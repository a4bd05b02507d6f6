"""Online training monitors (KungFu's gradient noise scale and gradient variance).

A registry maps a monitor's name to its class; a runner builds the monitors its
config names with :func:`build_monitor`. Add a monitor by adding
``monitors/NAME.py`` (a :class:`~hpcbench.monitors.base.Monitor`) and one line
in :data:`MONITORS`.
"""

from __future__ import annotations

import inspect

from hpcbench.monitors.base import GradientView, Monitor
from hpcbench.monitors.gns import GradientNoiseScale
from hpcbench.monitors.variance import GradientVariance
from hpcbench.runtime.registry import Registry

__all__ = ["MONITORS", "GradientView", "Monitor", "build_monitor", "monitor_options"]

#: monitor name -> class
MONITORS: Registry[type[Monitor]] = Registry("monitor", {
    GradientNoiseScale.name: GradientNoiseScale,
    GradientVariance.name: GradientVariance,
})


def monitor_options(name: str) -> tuple[str, ...]:
    """Option names the monitor ``name`` accepts (its constructor's keywords, ``interval`` first).

    Raises
    ------
    KeyError
        ``name`` is not registered.
    """
    cls = MONITORS[name]
    params = inspect.signature(cls.__init__).parameters
    return tuple(p for p in params if p != "self")


def build_monitor(name: str, **options) -> Monitor:
    """The monitor registered as ``name``, built with ``options`` (e.g. ``interval``).

    Raises
    ------
    KeyError
        ``name`` is not registered (the message lists the registered names).
    ValueError
        An option the monitor does not take, or a bad value (the message names
        the option).
    """
    cls = MONITORS[name]
    allowed = monitor_options(name)
    unknown = [k for k in options if k not in allowed]
    if unknown:
        raise ValueError(f"monitor {name!r}: unknown option {unknown[0]!r}; allowed: {', '.join(allowed)}")
    return cls(**options)

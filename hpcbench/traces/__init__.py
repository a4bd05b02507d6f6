"""Real-device system-heterogeneity traces for the federated-learning emulation.

FedScale-style virtual clock inputs, stored as numpy structs of arrays; a
client refers to a trace row by an integer index (e.g. ``client % len(trace)``
or a seeded random draw), never by a per-client Python object.

==========================  =============================  =========================
format name                 loader                         returns
==========================  =============================  =========================
``flhetbench-device``       :func:`load_device_latency`    :class:`DeviceTrace`
``mobiperf``                :func:`load_mobiperf`          :class:`BandwidthTrace`
``speed-distribution``      :func:`load_speed_distribution` :class:`SpeedDistributionTrace`
``flash``                   :func:`load_flash`             :class:`AvailabilityTrace`
``fedscale-capacity``       :func:`load_fedscale_capacity` (DeviceTrace, BandwidthTrace)
``fedscale-behavior``       :func:`load_fedscale_behavior` :class:`AvailabilityTrace`
``none``                    :func:`load_none`              always-available trace
==========================  =============================  =========================

Loaders taking an optional ``path`` default to the copies bundled in
``hpcbench/data/traces`` (see ``hpcbench/data/ATTRIBUTION.md``). Every loader
raises :class:`TraceError` (a :class:`ValueError`) naming the file and bad key.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from hpcbench.runtime.registry import Registry

from ._io import PathLike
from .availability import FLASH_FILE, AvailabilityTrace, always_available, load_flash
from .bandwidth import (
    MOBIPERF_FILE,
    SPEED_DISTRIBUTION_FILE,
    BandwidthTrace,
    SpeedDistributionTrace,
    load_mobiperf,
    load_speed_distribution,
)
from .device import DEVICE_COLUMNS, DEVICE_LATENCY_FILE, DeviceTrace, load_device_latency
from .errors import TraceError
from .fedscale import load_fedscale_behavior, load_fedscale_capacity, safe_load_pickle

__all__ = [
    "AvailabilityTrace",
    "BandwidthTrace",
    "DeviceTrace",
    "SpeedDistributionTrace",
    "TraceError",
    "TRACE_LOADERS",
    "DEVICE_COLUMNS",
    "DEVICE_LATENCY_FILE",
    "FLASH_FILE",
    "MOBIPERF_FILE",
    "SPEED_DISTRIBUTION_FILE",
    "always_available",
    "load_device_latency",
    "load_fedscale_behavior",
    "load_fedscale_capacity",
    "load_flash",
    "load_mobiperf",
    "load_none",
    "load_speed_distribution",
    "load_trace",
    "safe_load_pickle",
]


def load_none(path: PathLike | None = None) -> AvailabilityTrace:
    """The ``"none"`` format: a one-row, always-available trace.

    Parameters
    ----------
    path : ignored
        Accepted for a uniform loader signature; must be None.

    Returns
    -------
    AvailabilityTrace
        :func:`always_available` with one row (use row 0 for every client).

    Raises
    ------
    ValueError
        If a path is given.
    """
    if path is not None:
        raise ValueError("trace format 'none' takes no file")
    return always_available(1)


#: Trace format name -> loader ``f(path, **options)``.
TRACE_LOADERS: Registry[Callable[..., Any]] = Registry("trace format", {
    "flhetbench-device": load_device_latency,
    "mobiperf": load_mobiperf,
    "speed-distribution": load_speed_distribution,
    "flash": load_flash,
    "fedscale-capacity": load_fedscale_capacity,
    "fedscale-behavior": load_fedscale_behavior,
    "none": load_none,
})


def load_trace(fmt: str, path: PathLike | None = None, **options: Any) -> Any:
    """Load a trace by format name (see :data:`TRACE_LOADERS`).

    Parameters
    ----------
    fmt : str
        One of the keys of :data:`TRACE_LOADERS`.
    path : str or os.PathLike, optional
        Trace file; None selects the bundled copy where one exists (the
        FedScale formats need a path).
    **options
        Passed to the loader (e.g. ``column="ViT"`` for ``flhetbench-device``).

    Returns
    -------
    object
        What the loader returns.

    Raises
    ------
    ValueError
        Unknown format name, or a FedScale format without a path.
    TraceError
        From the loader.
    """
    loader = TRACE_LOADERS[fmt]
    if path is None and fmt.startswith("fedscale-"):
        raise ValueError(f"trace format {fmt!r} needs a path (no bundled FedScale file)")
    return loader(path, **options) if path is not None or fmt == "none" else loader(**options)

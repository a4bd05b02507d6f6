"""Per-rank device speed factors from a config's forms (shared by the pipeline and training runners).

A factor ``s >= 1`` stretches a rank's compute ``s`` times (1 is the
fastest device). Three forms:

- a list of factors, cycled over the ranks (``[1, 2]``: every other rank
  twice as slow);
- ``"k:1"``: ranks 0, 2, 4... at 1 and 1, 3, 5... ``k`` times slower (Sky
  Computing's "half the devices slower"; StellaTrain's 2:1 heterogeneous
  workers are ``"2:1"``);
- ``"trace"``: latencies of devices drawn with the seed from the bundled
  AI-Benchmark trace (ResNet column), over the smallest drawn.
"""

from __future__ import annotations

import math
import re

import numpy as np

from hpcbench.runtime.errors import InputError

__all__ = ["speed_factors", "check_speed_spec"]

_RATIO = re.compile(r"\s*[0-9]*\.?[0-9]+\s*:\s*1\s*")


def check_speed_spec(v):
    """``v`` if it is one of the forms (a config validator's body), else ValueError naming the forms."""
    if isinstance(v, str):
        if v != "trace" and not _RATIO.fullmatch(v):
            raise ValueError(f"expected a list of factors, 'k:1' or 'trace', got {v!r}")
        if v != "trace" and float(v.split(":")[0]) <= 0:
            raise ValueError(f"ratio must be positive, got {v!r}")
    elif not v or any(not (math.isfinite(x) and x > 0) for x in v):
        raise ValueError(f"factors must be a non-empty list of positive numbers, got {v!r}")
    return v


def speed_factors(spec, num_devices: int, seed: int, key: str = "devices.speed") -> np.ndarray:
    """Slowdown factor of each device, shape (num_devices,), float64, > 0.

    Parameters
    ----------
    spec : list of float or str
        One of the forms above (validated by :func:`check_speed_spec`).
    num_devices : int
    seed : int
        Seed of the ``"trace"`` draw.
    key : str
        Config key named in errors.

    Raises
    ------
    InputError
        The spec is not one of the forms, or the bundled trace cannot be read.
    """
    try:
        check_speed_spec(spec)
    except ValueError as exc:
        raise InputError(f"{key}: {exc}") from None
    if isinstance(spec, list):
        return np.resize(np.asarray(spec, dtype=np.float64), num_devices)
    if spec == "trace":
        from hpcbench.traces.device import load_device_latency
        from hpcbench.traces.errors import TraceError

        try:
            trace = load_device_latency()
        except (TraceError, OSError, ValueError) as exc:
            raise InputError(f"{key}: cannot read the bundled device trace: {exc}") from None
        rows = np.random.default_rng(seed).integers(0, len(trace), num_devices)
        lat = trace.mean_latency_s(rows)
        return lat / lat.min()
    k = float(spec.split(":")[0])
    out = np.ones(num_devices)
    out[1::2] = k
    return out

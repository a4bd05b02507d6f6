"""Per-rank device speed factors and memory caps from the config's forms."""

from __future__ import annotations

import numpy as np

from hpcbench.runtime.errors import InputError

__all__ = ["speed_factors", "memory_caps"]


def speed_factors(spec, num_devices: int, seed: int, key: str = "devices.speed") -> np.ndarray:
    """Slowdown factor of each device, shape (num_devices,), float64, > 0.

    Parameters
    ----------
    spec : list of float or str
        A list (cycled over the devices); ``"k:1"``: devices 0, 2, 4... at 1
        and 1, 3, 5... ``k`` times slower (Sky's "half the devices slower");
        ``"trace"``: latencies of devices drawn with ``seed`` from the bundled
        AI-Benchmark trace (ResNet column), divided by the smallest drawn.

    Raises
    ------
    InputError
        The bundled trace cannot be read.
    """
    if isinstance(spec, list):
        return np.resize(np.asarray(spec, dtype=np.float64), num_devices)
    if spec == "trace":
        from hpcbench.traces import TraceError
        from hpcbench.traces.device import load_device_latency

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


def memory_caps(spec, num_devices: int) -> np.ndarray:
    """Memory cap of each device in bytes, shape (num_devices,); ``inf`` for none."""
    if spec is None:
        return np.full(num_devices, np.inf)
    vals = spec if isinstance(spec, list) else [spec]
    return np.resize(np.asarray(vals, dtype=np.float64), num_devices) * 1e6

"""Network bandwidth traces: MobiPerf speed tests and per-device distributions."""

from __future__ import annotations

import dataclasses
import logging

import numpy as np

from . import _io
from .errors import TraceError

__all__ = [
    "BandwidthTrace",
    "SpeedDistributionTrace",
    "load_mobiperf",
    "load_speed_distribution",
    "MOBIPERF_FILE",
    "SPEED_DISTRIBUTION_FILE",
]

log = logging.getLogger(__name__)

#: Names of the bundled files (under ``hpcbench/data/traces``).
MOBIPERF_FILE = "mobiperf_tcp_speed.json.gz"
SPEED_DISTRIBUTION_FILE = "network_speed_distribution.json.gz"

_DIRECTIONS = ("down", "up")


def _check_direction(direction: str) -> None:
    if direction not in _DIRECTIONS:
        raise ValueError(f"direction must be 'down' or 'up', got {direction!r}")


@dataclasses.dataclass(frozen=True, eq=False)
class BandwidthTrace:
    """Empirical bandwidth samples for ``n`` traces, CSR layout.

    Samples of trace ``i`` are ``kbps[offsets[i]:offsets[i + 1]]`` (at least
    one each). The same samples serve both directions.

    Attributes
    ----------
    offsets : numpy.ndarray of int64, shape (n + 1,)
        CSR row pointers, ``offsets[0] == 0``, non-decreasing.
    kbps : numpy.ndarray of float64, shape (offsets[-1],)
        Bandwidth samples in kbit/s (>= 0).
    network_type : numpy.ndarray of str, shape (n,)
        Network type per trace as given by the source (e.g. ``"WIFI"``), or
        ``""`` when unknown.
    model : numpy.ndarray of str, shape (n,)
        Device model or client id per trace.
    source : str
        File the trace was read from.
    n_excluded : int
        Records left out (no speed sample).
    """

    offsets: np.ndarray
    kbps: np.ndarray
    network_type: np.ndarray
    model: np.ndarray
    source: str = ""
    n_excluded: int = 0

    def __post_init__(self) -> None:
        n = len(self.offsets) - 1
        if n < 0 or self.offsets[0] != 0 or self.offsets[-1] != len(self.kbps):
            raise ValueError("BandwidthTrace offsets must start at 0 and end at len(kbps)")
        if np.any(np.diff(self.offsets) <= 0):
            raise ValueError("BandwidthTrace needs at least one sample per trace")
        if len(self.network_type) != n or len(self.model) != n:
            raise ValueError("BandwidthTrace per-trace arrays must have n entries")

    def __len__(self) -> int:
        return len(self.offsets) - 1

    def mean_kbps(self, rows: np.ndarray) -> np.ndarray:
        """Mean of each row's samples in kbit/s (same shape as ``rows``)."""
        r = _io.as_rows(rows, len(self))
        sums = np.add.reduceat(self.kbps, self.offsets[:-1])
        return (sums / np.diff(self.offsets))[r]

    def sample_kbps(self, rows: np.ndarray, rng: np.random.Generator,
                    direction: str = "down") -> np.ndarray:
        """Draw one bandwidth sample in kbit/s per row.

        Each draw picks uniformly one of the row's recorded samples.

        Parameters
        ----------
        rows : array_like of int
            Row indices into this trace (repeats allowed).
        rng : numpy.random.Generator
            Source of randomness; same seed and rows give the same result.
        direction : {"down", "up"}
            Accepted for interface compatibility; speed tests give one speed
            for both directions.

        Returns
        -------
        numpy.ndarray of float64
            Bandwidth in kbit/s, same shape as ``rows``.

        Raises
        ------
        IndexError
            If a row is out of range.
        ValueError
            If ``direction`` is invalid.
        """
        _check_direction(direction)
        r = _io.as_rows(rows, len(self))
        lo = self.offsets[r]
        count = self.offsets[r + 1] - lo
        pick = lo + np.minimum((rng.random(r.shape) * count).astype(np.int64), count - 1)
        return self.kbps[pick]


@dataclasses.dataclass(frozen=True, eq=False)
class SpeedDistributionTrace:
    """Per-device normal bandwidth distributions (kbit/s), struct of arrays.

    Attributes
    ----------
    device_id : numpy.ndarray of str, shape (n,)
        Device identifier (GUID in the FLHetBench file).
    down_mean_kbps, down_sigma_kbps : numpy.ndarray of float64, shape (n,)
        Mean and standard deviation of download bandwidth, kbit/s.
    up_mean_kbps, up_sigma_kbps : numpy.ndarray of float64, shape (n,)
        Mean and standard deviation of upload bandwidth, kbit/s.
    source : str
        File the trace was read from.
    n_excluded : int
        Devices left out (zero mean in either direction).
    """

    device_id: np.ndarray
    down_mean_kbps: np.ndarray
    down_sigma_kbps: np.ndarray
    up_mean_kbps: np.ndarray
    up_sigma_kbps: np.ndarray
    source: str = ""
    n_excluded: int = 0

    #: Draws are truncated below at this fraction of the mean.
    FLOOR_FRACTION = 0.01

    def __len__(self) -> int:
        return len(self.device_id)

    def mean_kbps(self, rows: np.ndarray, direction: str = "down") -> np.ndarray:
        """Mean bandwidth in kbit/s of each row for ``direction``."""
        _check_direction(direction)
        r = _io.as_rows(rows, len(self))
        return (self.down_mean_kbps if direction == "down" else self.up_mean_kbps)[r]

    def sample_kbps(self, rows: np.ndarray, rng: np.random.Generator,
                    direction: str = "down") -> np.ndarray:
        """Draw one bandwidth in kbit/s per row from its truncated normal.

        The normal ``N(mean, sigma)`` is truncated to ``>= 1 %`` of the mean
        (rejection sampling; after 64 rounds any rare leftover is clipped).

        Parameters
        ----------
        rows : array_like of int
            Row indices into this trace (repeats allowed).
        rng : numpy.random.Generator
            Source of randomness; same seed and rows give the same result.
        direction : {"down", "up"}
            Download or upload bandwidth.

        Returns
        -------
        numpy.ndarray of float64
            Bandwidth in kbit/s, same shape as ``rows``.

        Raises
        ------
        IndexError
            If a row is out of range.
        ValueError
            If ``direction`` is invalid.
        """
        _check_direction(direction)
        r = _io.as_rows(rows, len(self))
        if direction == "down":
            mean, sigma = self.down_mean_kbps[r], self.down_sigma_kbps[r]
        else:
            mean, sigma = self.up_mean_kbps[r], self.up_sigma_kbps[r]
        floor = self.FLOOR_FRACTION * mean
        out = mean + sigma * rng.standard_normal(r.shape)
        bad = np.flatnonzero(out < floor)
        for _ in range(64):
            if bad.size == 0:
                break
            flat = out.reshape(-1)
            flat[bad] = mean.reshape(-1)[bad] + sigma.reshape(-1)[bad] * rng.standard_normal(bad.size)
            bad = bad[flat[bad] < floor.reshape(-1)[bad]]
        return np.maximum(out, floor)


def load_mobiperf(path: _io.PathLike | None = None) -> BandwidthTrace:
    """Load MobiPerf TCP speed tests (FLHetBench ``mobiperf_tcp_speed.json``).

    Parameters
    ----------
    path : str or os.PathLike, optional
        JSON file (``.json`` or ``.json.gz``): a list of tests
        ``{"model", "network_type", "tcp_speed_kbps": [kbit/s, ...], ...}``.
        Default: the bundled copy.

    Returns
    -------
    BandwidthTrace
        One row per test with at least one sample; tests with an empty
        ``tcp_speed_kbps`` list are excluded and counted in ``n_excluded``.
        ``network_type`` is upper-cased (the source mixes ``WIFI``/``Wifi``).

    Raises
    ------
    TraceError
        Missing file, malformed JSON, missing ``tcp_speed_kbps``, wrong type,
        negative or non-finite speed, or no test left.
    """
    p = _io.resolve(path, MOBIPERF_FILE)
    data = _io.read_json(p)
    _io.expect(p, "top level", data, list, "a list of speed tests")
    chunks: list[np.ndarray] = []
    types: list[str] = []
    models: list[str] = []
    n_empty = 0
    for i, rec in enumerate(data):
        where = f"test {i}"
        speeds = _io.float_array(p, f"{where}: key 'tcp_speed_kbps'",
                                 _io.get(p, where, rec, "tcp_speed_kbps"), "a list of numbers")
        if speeds.ndim != 1:
            raise TraceError(p, f"{where}: key 'tcp_speed_kbps': expected a flat list of numbers")
        if speeds.size == 0:
            n_empty += 1
            continue
        ntype = rec.get("network_type", "")
        model = rec.get("model", "")
        _io.expect(p, f"{where}: key 'network_type'", ntype, str, "a string")
        _io.expect(p, f"{where}: key 'model'", model, str, "a string")
        chunks.append(speeds)
        types.append(ntype.upper())
        models.append(model)
    if not chunks:
        raise TraceError(p, f"empty trace after filtering: {len(data)} tests, {n_empty} without samples")
    if n_empty:
        log.info("%s: excluded %d tests without speed samples", p, n_empty)
    offsets = np.zeros(len(chunks) + 1, dtype=np.int64)
    np.cumsum([c.size for c in chunks], out=offsets[1:])
    return BandwidthTrace(
        offsets=offsets,
        kbps=np.concatenate(chunks),
        network_type=np.asarray(types, dtype=str),
        model=np.asarray(models, dtype=str),
        source=str(p),
        n_excluded=n_empty,
    )


_DIST_KEYS = ("down_u", "down_sigma", "up_u", "up_sigma")


def load_speed_distribution(path: _io.PathLike | None = None) -> SpeedDistributionTrace:
    """Load per-device bandwidth distributions (``network_speed_distribution.json``).

    Parameters
    ----------
    path : str or os.PathLike, optional
        JSON file (``.json`` or ``.json.gz``):
        ``{"<device>": {"down_u", "down_sigma", "up_u", "up_sigma"}}`` in
        kbit/s. Default: the bundled copy.

    Returns
    -------
    SpeedDistributionTrace
        One row per device; devices with a zero mean in either direction are
        excluded and counted in ``n_excluded``.

    Raises
    ------
    TraceError
        Missing file, malformed JSON, missing key, wrong type, negative or
        non-finite value, or no device left.
    """
    p = _io.resolve(path, SPEED_DISTRIBUTION_FILE)
    data = _io.read_json(p)
    _io.expect(p, "top level", data, dict, "an object of devices")
    ids: list[str] = []
    cols: list[list[float]] = []
    n_zero = 0
    for dev, rec in data.items():
        where = f"device {dev!r}"
        vals = [_io.number(p, f"{where}: key {k!r}", _io.get(p, where, rec, k)) for k in _DIST_KEYS]
        if vals[0] == 0.0 or vals[2] == 0.0:
            n_zero += 1
            continue
        ids.append(dev)
        cols.append(vals)
    if not ids:
        raise TraceError(p, f"empty trace after filtering: {len(data)} devices, {n_zero} with zero mean")
    arr = np.asarray(cols, dtype=np.float64)
    return SpeedDistributionTrace(
        device_id=np.asarray(ids, dtype=str),
        down_mean_kbps=np.ascontiguousarray(arr[:, 0]),
        down_sigma_kbps=np.ascontiguousarray(arr[:, 1]),
        up_mean_kbps=np.ascontiguousarray(arr[:, 2]),
        up_sigma_kbps=np.ascontiguousarray(arr[:, 3]),
        source=str(p),
        n_excluded=n_zero,
    )

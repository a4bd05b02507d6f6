"""Per-device compute latency traces (FLHetBench / AI-Benchmark format)."""

from __future__ import annotations

import dataclasses
import logging

import numpy as np

from . import _io
from .errors import TraceError

__all__ = ["DeviceTrace", "load_device_latency", "DEVICE_LATENCY_FILE", "DEVICE_COLUMNS"]

log = logging.getLogger(__name__)

#: Name of the bundled file (under ``hpcbench/data/traces``).
DEVICE_LATENCY_FILE = "device_training_latency.json.gz"

#: Accepted ``column`` values and the JSON keys (mean, std) they read.
DEVICE_COLUMNS = {
    "ResNet": ("ResNet Latency", "ResNet STD"),
    "ViT": ("Vit Latency", "Vit STD"),
}


@dataclasses.dataclass(frozen=True, eq=False)
class DeviceTrace:
    """Compute latency per unit of work for ``n`` devices (struct of arrays).

    A client refers to a device by its integer row index.

    Attributes
    ----------
    model : numpy.ndarray of str, shape (n,)
        Device (phone model) name, or client id for FedScale traces.
    latency_ms : numpy.ndarray of float64, shape (n,)
        Mean latency of one unit of work in milliseconds (> 0).
    std_ms : numpy.ndarray of float64, shape (n,)
        Standard deviation of that latency in milliseconds (>= 0).
    unit : str
        The unit of work: ``"step"`` (one training step of the reference
        model, FLHetBench) or ``"sample"`` (FedScale ``computation``).
    source : str
        File the trace was read from (empty if built in memory).
    n_excluded : int
        Records of the file left out (zero latency, or lacking the column).
    """

    model: np.ndarray
    latency_ms: np.ndarray
    std_ms: np.ndarray
    unit: str = "step"
    source: str = ""
    n_excluded: int = 0

    def __post_init__(self) -> None:
        n = len(self.latency_ms)
        if len(self.model) != n or len(self.std_ms) != n:
            raise ValueError("DeviceTrace arrays must have the same length")

    def __len__(self) -> int:
        return len(self.latency_ms)

    def mean_latency_s(self, rows: np.ndarray) -> np.ndarray:
        """Mean latency per unit of work in seconds for the given rows.

        Parameters
        ----------
        rows : array_like of int
            Row indices into this trace.

        Returns
        -------
        numpy.ndarray of float64
            Same shape as ``rows``.

        Raises
        ------
        IndexError
            If a row is out of range.
        """
        r = _io.as_rows(rows, len(self))
        return self.latency_ms[r] / 1000.0

    def sample_latency_s(self, rows: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """Draw a latency per unit of work in seconds for each row.

        ``mean + N(0, std)``, clipped from below at 10 % of the mean.

        Parameters
        ----------
        rows : array_like of int
            Row indices into this trace (repeats allowed).
        rng : numpy.random.Generator
            Source of randomness; same seed and rows give the same result.

        Returns
        -------
        numpy.ndarray of float64
            Latency in seconds, same shape as ``rows``.

        Raises
        ------
        IndexError
            If a row is out of range.
        TypeError
            If rows are not integers.
        """
        r = _io.as_rows(rows, len(self))
        mean = self.latency_ms[r]
        ms = mean + rng.standard_normal(r.shape) * self.std_ms[r]
        return np.maximum(ms, 0.1 * mean) / 1000.0


def load_device_latency(path: _io.PathLike | None = None, column: str = "ResNet") -> DeviceTrace:
    """Load an FLHetBench ``device_training_latency.json`` trace.

    Parameters
    ----------
    path : str or os.PathLike, optional
        JSON file (``.json`` or gzipped ``.json.gz``): a list of records
        ``{"Phone Model", "<col> Latency", "<col> STD"}`` in milliseconds.
        Default: the bundled copy.
    column : {"ResNet", "ViT"}
        Which model's latency to read.

    Returns
    -------
    DeviceTrace
        One row per valid record, ``unit="step"``. Records with a latency of
        0.0 (invalid in the source data) or without the requested column are
        excluded and counted in ``n_excluded``.

    Raises
    ------
    TraceError
        Missing file, malformed JSON, a record that is not an object, missing
        ``"Phone Model"`` (or a std key next to a present latency key), wrong
        value type, negative or non-finite value, or no valid record left.
    ValueError
        If ``column`` is not one of the accepted names.
    """
    if column not in DEVICE_COLUMNS:
        raise ValueError(f"column must be one of {sorted(DEVICE_COLUMNS)}, got {column!r}")
    mean_key, std_key = DEVICE_COLUMNS[column]
    p = _io.resolve(path, DEVICE_LATENCY_FILE)
    data = _io.read_json(p)
    _io.expect(p, "top level", data, list, "a list of records")
    models: list[str] = []
    means: list[float] = []
    stds: list[float] = []
    n_zero = n_missing = 0
    for i, rec in enumerate(data):
        where = f"record {i}"
        name = _io.expect(p, f"{where}: key 'Phone Model'", _io.get(p, where, rec, "Phone Model"), str, "a string")
        if mean_key not in rec:
            n_missing += 1
            continue
        mean = _io.number(p, f"{where}: key {mean_key!r}", rec[mean_key])
        std = _io.number(p, f"{where}: key {std_key!r}", _io.get(p, where, rec, std_key))
        if mean == 0.0:
            n_zero += 1
            continue
        models.append(name)
        means.append(mean)
        stds.append(std)
    if not means:
        raise TraceError(
            p,
            f"empty trace after filtering: {len(data)} records, {n_zero} with zero "
            f"{mean_key!r}, {n_missing} without key {mean_key!r}",
        )
    if n_zero or n_missing:
        log.info("%s: excluded %d records with zero %r and %d without it",
                 p, n_zero, mean_key, n_missing)
    return DeviceTrace(
        model=np.asarray(models, dtype=str),
        latency_ms=np.asarray(means, dtype=np.float64),
        std_ms=np.asarray(stds, dtype=np.float64),
        unit="step",
        source=str(p),
        n_excluded=n_zero + n_missing,
    )

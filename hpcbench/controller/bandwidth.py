"""StellaTrain's bandwidth estimate: measured receive throughput, corrected by how long workers wait.

Source: ``backend/src/engine/batch_rate_alloc.py`` (``update_telemetry``,
lines 126-138: each worker's receive throughput smoothed
``0.1 old + 0.9 new``; ``logic``, lines 196-200: the minimum over workers of
the positive ones) and ``backend/src/engine/batch_rate_alloc_optim.py``
(``MainOptimizer.step_main``, lines 206-233).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Literal

from pydantic import Field

from hpcbench.runtime.config import StrategyConfig
from hpcbench.telemetry.record import TelemetryRecord

__all__ = ["BandwidthEstimate", "BandwidthEstimator"]


@dataclass(frozen=True)
class BandwidthEstimate:
    """One estimator step.

    Attributes
    ----------
    measured_bps : float
        Minimum over workers of the smoothed receive throughput (bit/s; 0
        when no worker has measured any).
    wait_s : float
        Minimum over workers of ``bwd_fwd_gap_s + intra_fwd_gap_s`` (NaN at
        the first step, which does not use it).
    compute_s : float
        Mean over workers of ``1.5 * backward_s`` (forward + backward, the
        forward taken as half the backward).
    reduce_fraction : float
        ``r = wait / (wait + compute)``, 0 below 0.05.
    estimate_bps : float
        The new estimate (bit/s).
    """

    measured_bps: float
    wait_s: float
    compute_s: float
    reduce_fraction: float
    estimate_bps: float

    @property
    def probing(self) -> bool:
        """True when nobody waited (``r = 0``): the estimate was raised to probe for more bandwidth."""
        return self.reduce_fraction == 0.0


class BandwidthEstimator:
    """The bandwidth the controller plans with, from the workers' telemetry.

    :meth:`observe` takes every record (each step, each worker): the
    worker's receive throughput is smoothed ``s = keep * s + (1 - keep) * new``
    (``keep`` 0.1; the first reading as it is) and its latest record kept.
    :meth:`estimate`, called at a decision:

    1. ``measured = min`` over workers of the smoothed throughputs that are > 0
       (0 if none);
    2. at the first call, ``estimate = measured``; else
    3. ``wait = min_i (bwd_fwd_gap_i + intra_fwd_gap_i)``,
       ``compute = mean_i (1.5 * backward_i)`` (latest records),
       ``r = wait / (wait + compute)``, and ``r = 0`` when ``r < 0.05``;
    4. ``e = 0.9 * estimate + 0.1 * measured``;
       ``estimate = 1.1 * e`` when ``r = 0`` (nobody waits: probe up), else
       ``estimate = e * max(0.75, 1 - r)``.

    Waiting means the gradients' exchange did not fit the compute, so the
    link is slower than planned; nobody waiting means it may be faster.
    StellaTrain's constants are the defaults; its times are in ms and
    throughputs in Mbit/s, hpcbench's in s and bit/s (the rule is
    unit-free: ``r`` is a ratio, the estimate linear).

    Parameters
    ----------
    reading : {"peak", "mean"}, default "peak"
        Which meter reading is the receive throughput: the busiest 100 ms
        bin (StellaTrain's) or the 1 s mean.
    smoothing : float, default 0.1
        Weight of the old value in each worker's smoothed throughput.
    keep : float, default 0.9
        Weight of the previous estimate in step 4.
    probe : float, default 1.1
    floor_factor : float, default 0.75
        Least factor a wait can cut the estimate by.
    min_fraction : float, default 0.05
        ``r`` below it counts as 0.
    compute_factor : float, default 1.5

    Raises
    ------
    ValueError
        ``reading`` unknown.
    """

    class Config(StrategyConfig):
        """Options of the ``stellatrain`` estimator (the keywords of its constructor)."""

        reading: Literal["peak", "mean"] = Field("peak", description="receive throughput read from the meter: "
                                                                      "busiest 100 ms bin (StellaTrain) or 1 s mean")

    def __init__(self, reading: str = "peak", smoothing: float = 0.1, keep: float = 0.9, probe: float = 1.1,
                 floor_factor: float = 0.75, min_fraction: float = 0.05, compute_factor: float = 1.5) -> None:
        if reading not in ("peak", "mean"):
            raise ValueError(f"reading must be 'peak' or 'mean', got {reading!r}")
        self.reading = reading
        self.smoothing, self.keep, self.probe = smoothing, keep, probe
        self.floor_factor, self.min_fraction, self.compute_factor = floor_factor, min_fraction, compute_factor
        self._smoothed: dict[int, float] = {}
        self._latest: dict[int, TelemetryRecord] = {}
        self.estimate_bps: float | None = None

    def observe(self, records: Iterable[TelemetryRecord]) -> None:
        """Take telemetry records (any workers, any order of steps)."""
        for rec in records:
            new = rec.recv_peak_bps if self.reading == "peak" else rec.recv_mean_bps
            old = self._smoothed.get(rec.rank)
            self._smoothed[rec.rank] = new if old is None else old * self.smoothing + new * (1 - self.smoothing)
            self._latest[rec.rank] = rec

    def measured_bps(self) -> float:
        """Minimum over workers of the positive smoothed receive throughputs (0 if none)."""
        valid = [v for v in self._smoothed.values() if v > 0]
        return min(valid) if valid else 0.0

    def estimate(self) -> BandwidthEstimate:
        """One estimator step (a controller decision); updates :attr:`estimate_bps`.

        Raises
        ------
        RuntimeError
            No record was observed yet.
        """
        if not self._latest:
            raise RuntimeError("no telemetry observed yet")
        measured = self.measured_bps()
        if self.estimate_bps is None:
            self.estimate_bps = measured
            return BandwidthEstimate(measured, float("nan"), float("nan"), 0.0, measured)
        recs = list(self._latest.values())
        wait = min(r.bwd_fwd_gap_s + r.intra_fwd_gap_s for r in recs)
        compute = sum(self.compute_factor * r.backward_s for r in recs) / len(recs)
        r = max(0.0, wait / (wait + compute)) if wait + compute > 0 else 0.0
        if r < self.min_fraction:
            r = 0.0
        e = self.estimate_bps * self.keep + measured * (1 - self.keep)
        self.estimate_bps = e * self.probe if r == 0.0 else e * max(self.floor_factor, 1 - r)
        return BandwidthEstimate(measured, wait, compute, r, self.estimate_bps)

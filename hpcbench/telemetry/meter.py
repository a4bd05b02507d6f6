"""StellaTrain's bandwidth meter: bytes over a sliding 1 s window, read as its busiest 100 ms bin and its mean."""

from __future__ import annotations

import math
import time
from collections import deque
from typing import Callable

__all__ = ["BandwidthMeter"]


class BandwidthMeter:
    """Throughput of a stream of transfers over a sliding window.

    StellaTrain's ``BandwidthMonitor`` (``backend/src/misc/bandwidth_monitor.h``)
    records the size of each received message at its arrival, forgets those
    older than ``window_s`` (1 s), and reports ``max over bins`` of the bytes
    in each ``bin_s`` (100 ms) bin, counted back from the query time (bin
    ``floor((now - t) / bin_s)``, ``window_s / bin_s + 1`` bins), divided by
    ``bin_s``; its other mode (compiled out there) the bytes of the whole
    window divided by ``window_s``. This meter reports both.

    hpcbench's messages are whole gradient buckets, so a transfer can be
    recorded with its start and end (:meth:`record_span`): its bytes are
    spread evenly over that time (pieces of at most ``bin_s / 10``, each at its middle),
    where StellaTrain's many small ZeroMQ messages spread themselves.

    Parameters
    ----------
    window_s : float, default 1.0
    bin_s : float, default 0.1
        ``0 < bin_s <= window_s``.
    clock : callable, default time.monotonic
        Seconds now (e.g. :meth:`hpcbench.runtime.dilation.TimeDilation.now`
        for modelled time).

    Raises
    ------
    ValueError
        Non-positive ``window_s`` or ``bin_s``, or ``bin_s > window_s``.
    """

    def __init__(self, window_s: float = 1.0, bin_s: float = 0.1,
                 clock: Callable[[], float] = time.monotonic) -> None:
        if not (window_s > 0 and 0 < bin_s <= window_s):
            raise ValueError(f"need 0 < bin_s <= window_s, got bin_s={bin_s!r}, window_s={window_s!r}")
        self.window_s = float(window_s)
        self.bin_s = float(bin_s)
        self.clock = clock
        self._events: deque[tuple[float, float]] = deque()
        self.total_bytes = 0.0

    def record(self, nbytes: float, t: float | None = None) -> None:
        """``nbytes`` arrived at time ``t`` (default now)."""
        t = self.clock() if t is None else float(t)
        self._events.append((t, float(nbytes)))
        self.total_bytes += nbytes

    def record_span(self, nbytes: float, start: float, end: float) -> None:
        """``nbytes`` arrived evenly between ``start`` and ``end`` (a transfer's time on the wire)."""
        if end <= start:
            self.record(nbytes, end)
            return
        pieces = max(1, math.ceil((end - start) / (self.bin_s / 10)))
        step = (end - start) / pieces
        for i in range(pieces):
            self.record(nbytes / pieces, start + (i + 0.5) * step)

    def _window(self, now: float):
        while self._events and now - self._events[0][0] >= self.window_s:
            self._events.popleft()
        return [(t, b) for t, b in self._events if t <= now]

    def peak_bps(self, now: float | None = None) -> float:
        """Bytes of the busiest ``bin_s`` bin of the last ``window_s``, in bit/s (StellaTrain's reading)."""
        now = self.clock() if now is None else float(now)
        bins = [0.0] * (int(round(self.window_s / self.bin_s)) + 1)
        for t, b in self._window(now):
            bins[min(int((now - t) // self.bin_s), len(bins) - 1)] += b
        return max(bins) * 8.0 / self.bin_s

    def mean_bps(self, now: float | None = None) -> float:
        """Bytes of the last ``window_s`` over ``window_s``, in bit/s."""
        now = self.clock() if now is None else float(now)
        return sum(b for _, b in self._window(now)) * 8.0 / self.window_s

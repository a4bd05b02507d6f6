"""What a link delivered while it was busy: bytes over the transfers' own wire seconds, per step."""

from __future__ import annotations

__all__ = ["DeliveryMeter"]


class DeliveryMeter:
    """Bytes delivered over the seconds the transfers were on the wire, accumulated until read.

    Each completed transfer adds its bytes and its time on the wire, from
    its first byte to its last (the link's latency and any wait for the
    link or for the peer left out); :meth:`take` returns their ratio in
    bit/s and starts over, so a reader that takes once per training step
    gets the step's buckets pooled: ``8 * sum(bytes) / sum(seconds)``, the
    byte-weighted rate the link ran at while it carried this rank's traffic.
    Concurrent transfers from different peers (each over its own link)
    count their own seconds each, so the reading is one link's rate, not
    the sum of the peers'.

    StellaTrain's ``BandwidthMonitor`` (``backend/src/misc/bandwidth_monitor.h``,
    :class:`~hpcbench.telemetry.meter.BandwidthMeter` here) instead counts bytes
    per 100 ms of clock time, which reads the link's rate only when the
    link is kept busy for a whole bin; hpcbench's whole-bucket messages
    (e.g. a 40 KB compressed bucket: 3 ms at 100 Mbit/s) leave it idle most
    of each bin, so that meter reads far below the link (see
    :class:`hpcbench.controller.DeliveredBandwidthEstimator`).

    Attributes
    ----------
    bytes, seconds : float
        Pooled since the last :meth:`take`.
    total_bytes : float
        Bytes recorded since construction.
    """

    def __init__(self) -> None:
        self.bytes = 0.0
        self.seconds = 0.0
        self.total_bytes = 0.0

    def record(self, nbytes: float, first: float, last: float) -> None:
        """``nbytes`` arrived, the first byte at ``first`` and the last at ``last`` (seconds, one clock).

        A transfer of no duration (``last <= first``) adds its bytes to
        :attr:`total_bytes` only: it says nothing about the rate.
        """
        self.total_bytes += nbytes
        if last > first and nbytes > 0:
            self.bytes += float(nbytes)
            self.seconds += float(last - first)

    def take(self) -> float:
        """Pooled rate in bit/s since the last call (NaN if no transfer with a duration completed); resets."""
        rate = self.bytes * 8.0 / self.seconds if self.seconds > 0 else float("nan")
        self.bytes = self.seconds = 0.0
        return rate

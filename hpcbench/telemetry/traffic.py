"""A transport's traffic, metered both ways: the send and receive :class:`~hpcbench.telemetry.meter.BandwidthMeter`."""

from __future__ import annotations

from hpcbench.telemetry.delivery import DeliveryMeter
from hpcbench.telemetry.meter import BandwidthMeter

__all__ = ["TrafficMeters"]


class TrafficMeters:
    """Send and receive meters of one rank, fed by its transport (``transport.meter = TrafficMeters(...)``).

    StellaTrain meters the gradient bytes each worker sends and receives
    (``BandwidthMonitor`` around its ZeroMQ sockets, ``comm_manager.cpp``);
    hpcbench's transport calls :meth:`sent` and :meth:`received` with each
    message's time on the wire, in its clock (``time.monotonic()``), and the
    meters keep modelled seconds (``dilation.to_model``), the clock of the
    step loop.

    Parameters
    ----------
    dilation : hpcbench.runtime.dilation.TimeDilation
        Wall seconds to modelled seconds.
    window_s, bin_s : float
        The meters' window and bin (StellaTrain: 1 s and 100 ms), modelled seconds.

    Attributes
    ----------
    send, recv : BandwidthMeter
    delivered : DeliveryMeter
        The received transfers' bytes over their own seconds on the wire
        (modelled seconds), pooled until :meth:`delivered_bps` reads them.
    """

    def __init__(self, dilation, window_s: float = 1.0, bin_s: float = 0.1) -> None:
        self.to_model = dilation.to_model
        self.send = BandwidthMeter(window_s, bin_s, clock=dilation.now)
        self.recv = BandwidthMeter(window_s, bin_s, clock=dilation.now)
        self.delivered = DeliveryMeter()

    def sent(self, nbytes: int, start: float, end: float) -> None:
        """``nbytes`` left between wall times ``start`` and ``end`` (seconds of ``time.monotonic()``)."""
        self.send.record_span(nbytes, self.to_model(start), self.to_model(end))

    def received(self, nbytes: int, start: float, end: float) -> None:
        """``nbytes`` arrived between wall times ``start`` and ``end``."""
        first, last = self.to_model(start), self.to_model(end)
        self.recv.record_span(nbytes, first, last)
        self.delivered.record(nbytes, first, last)

    def readings(self, now: float) -> tuple[float, float, float, float]:
        """``(send peak, send mean, receive peak, receive mean)`` in bit/s at modelled time ``now``."""
        return (self.send.peak_bps(now), self.send.mean_bps(now), self.recv.peak_bps(now), self.recv.mean_bps(now))

    def delivered_bps(self) -> float:
        """Received bytes over their seconds on the wire since the last call, bit/s (NaN: none); resets."""
        return self.delivered.take()

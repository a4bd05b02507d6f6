"""One rank's telemetry of one training step (StellaTrain's ``Telemetry`` message, in SI units).

StellaTrain's workers report, per iteration, a ``TrainConfig`` (micro-batch
size, gradient accumulation, compression rate) and ``Measurements``
(gradient send and receive throughput in Mbit/s; forward and backward time,
the gap from backward to the next forward and the gap inside forward, in
ms) to its controller (``backend/src/proto/message.proto``, messages
``TrainConfig``, ``Measurements``, ``Telemetry``; sent by
``engine/telemetry_client.cpp``, ``TelemetryClient::report``). hpcbench
keeps the same quantities in seconds and bit/s, records both readings of
the bandwidth meter (StellaTrain reports only the highest 100 ms bin) and
the compression as the fraction *kept* (StellaTrain's ``compression_rate``
is the fraction dropped: ``1 - ratio``).

Every field carries its unit and meaning in its metadata; the HDF5 table
(:func:`hpcbench.results.records.columns_of`) and the docs are built from them.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields

import numpy as np

__all__ = ["TelemetryRecord", "unit_field"]


def unit_field(unit: str, description: str, **kwargs):
    """A dataclass field carrying its unit and meaning (read by :func:`hpcbench.results.records.columns_of`);
    ``kwargs`` go to :func:`dataclasses.field` (e.g. ``default``)."""
    return field(metadata={"unit": unit, "description": description}, **kwargs)


@dataclass(frozen=True)
class TelemetryRecord:
    """One rank's measurements and configuration for one step.

    Attributes
    ----------
    step : int
        Training step, from 0.
    rank : int
        MPI rank (StellaTrain's ``client_id``).
    time_s : float
        End of the step, seconds since the run's start (modelled seconds
        under time dilation).
    forward_s, backward_s : float
        Forward and backward compute time of the step (StellaTrain's
        ``fwd_delay_ms``, ``bwd_delay_ms``).
    bwd_fwd_gap_s : float
        From the end of this step's backward to the start of the next
        forward: the wait for the gradients' exchange and update
        (``bwd_fwd_gap_ms``).
    intra_fwd_gap_s : float
        Time inside forward spent waiting (for parameters still being
        updated) rather than computing (``intra_fwd_gap_ms``).
    send_peak_bps, recv_peak_bps : float
        Gradient send / receive throughput: the busiest 100 ms bin of the
        last 1 s, in bit/s (StellaTrain's ``grad_send_thpt_mbps``,
        ``grad_recv_thpt_mbps``: ``BandwidthMonitor::query_bandwidth`` in
        ``misc/bandwidth_monitor.h``, ``mode_max``).
    send_mean_bps, recv_mean_bps : float
        The same meters' mean over the 1 s window, in bit/s (the monitor's
        other mode).
    micro_batch : int
        Samples per micro-batch on this rank (``ubatch_size``).
    grad_accumulation : int
        Micro-batches accumulated per step (``gradient_accumulation``).
    ratio : float
        Fraction of the gradient's elements kept (``1 - compression_rate``).
    recv_busy_bps : float
        Bytes received during the step over those transfers' own seconds on
        the wire (first byte to last; :class:`~hpcbench.telemetry.DeliveryMeter`),
        in bit/s: the link's rate while it carried them (not in StellaTrain;
        NaN when nothing arrived in the step).
    """

    step: int = unit_field("1", "training step, from 0")
    rank: int = unit_field("1", "MPI rank")
    time_s: float = unit_field("s", "end of the step since the run started (modelled seconds)")
    forward_s: float = unit_field("s", "forward compute time")
    backward_s: float = unit_field("s", "backward compute time")
    bwd_fwd_gap_s: float = unit_field("s", "end of backward to start of the next forward (waiting for the update)")
    intra_fwd_gap_s: float = unit_field("s", "waiting inside forward (parameters not yet updated)")
    send_peak_bps: float = unit_field("bit/s", "gradient send throughput: busiest 100 ms bin of the last 1 s")
    send_mean_bps: float = unit_field("bit/s", "gradient send throughput: mean over the last 1 s")
    recv_peak_bps: float = unit_field("bit/s", "gradient receive throughput: busiest 100 ms bin of the last 1 s")
    recv_mean_bps: float = unit_field("bit/s", "gradient receive throughput: mean over the last 1 s")
    micro_batch: int = unit_field("1", "samples per micro-batch")
    grad_accumulation: int = unit_field("1", "micro-batches accumulated per step")
    ratio: float = unit_field("1", "fraction of gradient elements kept (StellaTrain's compression rate is 1 - this)")
    recv_busy_bps: float = unit_field("bit/s", "bytes received in the step over their seconds on the wire (NaN: none)",
                                      default=float("nan"))

    @classmethod
    def names(cls) -> tuple[str, ...]:
        """Field names, in order (the order of :meth:`vector`)."""
        return tuple(f.name for f in fields(cls))

    def vector(self) -> np.ndarray:
        """The fields as one float64 array (cheap to gather to rank 0; integers exact below 2**53)."""
        return np.array([getattr(self, n) for n in self.names()], dtype=np.float64)

    @classmethod
    def from_vector(cls, v) -> "TelemetryRecord":
        """Inverse of :meth:`vector` (integer fields rounded back to int)."""
        kinds = {f.name: f.type for f in fields(cls)}
        return cls(**{n: (int(round(x)) if kinds[n] in (int, "int") else float(x))
                      for n, x in zip(cls.names(), v)})

    def row(self) -> dict:
        """The record as a mapping of field name to value (one table row)."""
        return asdict(self)

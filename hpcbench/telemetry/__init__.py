"""Per-step, per-rank training telemetry (StellaTrain's) and the bandwidth meter that feeds it.

- :class:`TelemetryRecord`: one rank's step (times, gaps, throughputs,
  micro-batch, accumulation, compression), with units; its HDF5 table is
  built from it by :func:`hpcbench.results.records.columns_of`.
- :class:`BandwidthMeter`: bytes over a sliding 1 s window, read as the
  busiest 100 ms bin (StellaTrain) and as the mean.
- :class:`DeliveryMeter`: bytes over the transfers' own seconds on the
  wire, pooled per step (what the link delivered while busy).
- :class:`TrafficMeters`: a rank's send and receive meters, fed by its
  transport (``transport.meter``).
"""

from hpcbench.telemetry.delivery import DeliveryMeter
from hpcbench.telemetry.meter import BandwidthMeter
from hpcbench.telemetry.record import TelemetryRecord
from hpcbench.telemetry.traffic import TrafficMeters

__all__ = ["BandwidthMeter", "DeliveryMeter", "TelemetryRecord", "TrafficMeters"]

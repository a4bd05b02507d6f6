"""The virtual clock: when each participant would finish on its real device and network.

A FedScale-style emulation runs every client's training for real, but charges
time from traces of real phones instead of the emulating machine's:

- compute: ``local_steps * batch_size * latency_s * compute_scale``, with
  ``latency_s`` the client's device's per-sample training latency, drawn each
  round around the trace's mean with its standard deviation, and
  ``compute_scale`` the config's ``traces.compute_scale`` times, with
  ``traces.compute_cost: flops``, the model's cost ratio to the trace's
  reference model (:mod:`hpcbench.fl.compute_cost`);
- communication: the model's bytes down and the update's bytes up, each
  ``nbytes * 8 / 1000 / kbps`` seconds at a bandwidth drawn from the client's
  bandwidth trace;
- availability: a client can be selected only while its availability trace
  says it is online at the round's start;
- dropouts (``dropouts: true``): a client whose trace says it is offline at
  the moment it would finish drops out. This is FedScale's check
  (``isClientActive(client, start + duration)`` in its aggregator's
  ``tictak_client_tasks``): availability is tested at the finish time only,
  so a client that goes offline and comes back before it finishes is not
  caught. A dropout consumed its device's time but its update is discarded
  and it never counts toward the round's ``participants``.

The round ends when the ``participants``-th earliest selected client that did
not drop out finishes (FedScale's overcommitment: later ones are stragglers,
dropped and recorded); with fewer such clients, when the last of them
finishes, and when every selected client dropped out, when the last dropout
would have finished (the server learns of it then; the model is unchanged).
Every draw comes from a generator seeded by ``(seed, round, client_id)``, so
all ranks compute the same clock without communicating.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from hpcbench.fl.settings import ClockSettings

__all__ = ["ClientRegistry", "RoundTiming", "VirtualClock", "expected_durations"]


class ClientRegistry:
    """Registered clients as integer rows into the traces (struct of arrays).

    Parameters
    ----------
    num_clients : int
    num_examples : ndarray of shape (num_clients,), int64
        Local example counts (from the dataset's split).
    n_device, n_bandwidth, n_availability : int
        Number of rows in each trace; clients are mapped to rows uniformly at
        random with a generator seeded from ``seed``.
    seed : int

    Attributes
    ----------
    device_row, bandwidth_row, availability_row : ndarray of shape (num_clients,), int32
    """

    def __init__(self, num_clients: int, num_examples: np.ndarray, n_device: int, n_bandwidth: int,
                 n_availability: int, seed: int) -> None:
        rng = np.random.default_rng([seed, 0xC11E])
        self.num_clients = int(num_clients)
        self.num_examples = np.asarray(num_examples, dtype=np.int64)
        self.device_row = rng.integers(0, n_device, num_clients, dtype=np.int32)
        self.bandwidth_row = rng.integers(0, n_bandwidth, num_clients, dtype=np.int32)
        self.availability_row = rng.integers(0, n_availability, num_clients, dtype=np.int32)

    def nbytes(self) -> int:
        """Bytes of per-client metadata held here."""
        return int(self.num_examples.nbytes + self.device_row.nbytes + self.bandwidth_row.nbytes
                   + self.availability_row.nbytes)


def expected_durations(registry: ClientRegistry, device, bandwidth, model_bytes: int, examples_per_round: int,
                       compute_scale: float, up_bytes: int | None = None) -> np.ndarray:
    """Each client's expected round duration in virtual seconds, from its trace rows' means.

    ``examples_per_round * mean_latency_s * compute_scale + model_bytes * 8 / 1000
    * (1 / mean_kbps_down + 1 / mean_kbps_up)``: the clock's formulas at the
    traces' means (what FedScale's client manager registers a client with
    before it has run). With ``up_bytes`` (a compressed uplink) the upload
    charges ``up_bytes`` and the download ``model_bytes`` (the downlink's
    wire bytes).

    Returns
    -------
    ndarray of shape (num_clients,), float64
    """
    compute = examples_per_round * device.mean_latency_s(registry.device_row) * compute_scale
    rows = registry.bandwidth_row
    try:
        down = bandwidth.mean_kbps(rows, direction="down")
        up = bandwidth.mean_kbps(rows, direction="up")
    except TypeError:  # a trace with one speed for both directions
        down = up = bandwidth.mean_kbps(rows)
    down, up = np.asarray(down, np.float64), np.asarray(up, np.float64)
    if up_bytes is None or up_bytes == model_bytes:
        comm = model_bytes * 8 / 1000 * (1.0 / down + 1.0 / up)
    else:
        comm = model_bytes * 8 / 1000 / down + up_bytes * 8 / 1000 / up
    return np.asarray(compute, dtype=np.float64) + comm


@dataclass
class RoundTiming:
    """Virtual timing of one round (all times in seconds of virtual time).

    Attributes
    ----------
    start_s, end_s : float
        Round start and end on the virtual clock.
    online : int
        Clients online at the round's start.
    client_ids : ndarray of shape (m,), int64
        Selected clients, ascending.
    compute_s, communication_s, completion_s : ndarray of shape (m,), float64
        Per-client compute time, download plus upload time, and their sum.
    aggregated : ndarray of shape (m,), bool
        True for the earliest ``participants`` finishers that did not drop out;
        False for stragglers and dropouts.
    dropped : ndarray of shape (m,), bool
        True for clients offline at their finish time (dropouts); all False
        when dropouts are off.
    """

    start_s: float
    end_s: float
    online: int
    client_ids: np.ndarray
    compute_s: np.ndarray
    communication_s: np.ndarray
    completion_s: np.ndarray
    aggregated: np.ndarray
    dropped: np.ndarray = field(default=None)

    def __post_init__(self) -> None:
        if self.dropped is None:
            self.dropped = np.zeros(len(self.client_ids), dtype=bool)


class VirtualClock:
    """Select participants and time them against the traces, round by round.

    Parameters
    ----------
    settings : hpcbench.fl.settings.ClockSettings
        The keys the clock reads (seed, participants, overcommitment, local
        steps, batch size, dropouts, compute scale).
    registry : ClientRegistry
    device, bandwidth, availability : trace objects
        From :mod:`hpcbench.traces` (``sample_latency_s``, ``sample_kbps``,
        ``is_available``/``next_available_s``).
    model_bytes : int
        Bytes of the model sent down and of the update sent up; the
        attributes ``down_bytes`` and ``up_bytes`` start at this value and
        are what the clock charges (set them to a compressor's payload size
        for compressed transfers).
    compute_scale : float, optional
        Factor on the per-sample latency (attribute ``compute_scale``);
        default ``settings.compute_scale``.
    selector : hpcbench.fl.contracts.Selector
        Picks each round's participants (and, in async mode, each refill of
        FedBuff's in-flight slots).
    """

    def __init__(self, settings: ClockSettings, registry: ClientRegistry, device, bandwidth, availability,
                 model_bytes: int, selector, compute_scale: float | None = None) -> None:
        self.settings = settings
        self.compute_scale = float(settings.compute_scale if compute_scale is None else compute_scale)
        self.registry = registry
        self.device = device
        self.bandwidth = bandwidth
        self.availability = availability
        self.model_bytes = int(model_bytes)
        self.down_bytes = int(model_bytes)
        self.up_bytes = int(model_bytes)
        self.selector = selector
        self.now_s = 0.0
        self._all_ids = np.arange(registry.num_clients, dtype=np.int64)

    def _online(self) -> np.ndarray:
        rows = self.registry.availability_row
        online = np.flatnonzero(self.availability.is_available(rows, self.now_s))
        if online.size == 0:
            used = np.unique(rows)
            self.now_s = float(np.min(self.availability.next_available_s(used, self.now_s)))
            online = np.flatnonzero(self.availability.is_available(rows, self.now_s))
        return online.astype(np.int64)

    def client_times(self, ids: np.ndarray, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
        """Virtual compute and communication seconds of clients ``ids`` (float64, shape (m,) each).

        Draws, in this order and in the order of ``ids``: device latencies,
        downlink then uplink bandwidths. Communication charges
        ``down_bytes`` and ``up_bytes``, ``nbytes * 8 / 1000 / kbps`` each.
        """
        s, reg = self.settings, self.registry
        latency = np.asarray(self.device.sample_latency_s(reg.device_row[ids], rng), dtype=np.float64)
        compute = s.local_steps * s.batch_size * latency * self.compute_scale
        rows = reg.bandwidth_row[ids]
        kbps_down = np.asarray(self.bandwidth.sample_kbps(rows, rng, direction="down"), dtype=np.float64)
        kbps_up = np.asarray(self.bandwidth.sample_kbps(rows, rng, direction="up"), dtype=np.float64)
        if self.down_bytes == self.up_bytes:  # the uncompressed case keeps its historical rounding
            comm = self.up_bytes * 8 / 1000 * (1.0 / kbps_down + 1.0 / kbps_up)
        else:
            comm = self.down_bytes * 8 / 1000 / kbps_down + self.up_bytes * 8 / 1000 / kbps_up
        return compute, comm

    def dropped_out(self, ids: np.ndarray, finish_s) -> np.ndarray:
        """Whether each client is offline at its finish time ``finish_s`` (FedScale's dropout test).

        All False when the config's ``dropouts`` is off. Returns bool, shape of ``ids``.
        """
        if not self.settings.dropouts:
            return np.zeros(len(ids), dtype=bool)
        rows = self.registry.availability_row[ids]
        return ~np.asarray(self.availability.is_available(rows, finish_s), dtype=bool)

    def next_round(self, round_: int) -> RoundTiming:
        """Select and time round ``round_``'s participants, then advance the clock."""
        s = self.settings
        online = self._online()
        count = s.selected
        ids = self.selector.select(round_, online, count)
        m = len(ids)
        # one generator per round, drawn in ascending client-id order (vectorised: a few
        # numpy calls per round instead of a Python loop over participants)
        rng = np.random.default_rng([s.seed, round_, 0xC10C])
        compute, comm = self.client_times(ids, rng)
        completion = compute + comm
        start = self.now_s
        dropped = self.dropped_out(ids, start + completion)
        order = np.lexsort((ids, completion))
        order = order[~dropped[order]]
        keep = min(s.participants, len(order))
        aggregated = np.zeros(m, dtype=bool)
        aggregated[order[:keep]] = True
        if keep:
            end = start + float(completion[order[keep - 1]])
        else:  # nobody finished: the server waited for the last dropout
            end = start + (float(completion.max()) if m else 0.0)
        self.now_s = end
        return RoundTiming(start, end, int(online.size), ids, compute, comm, completion, aggregated, dropped)

"""A transport that makes every message take the time a modelled link would take.

Model (per sending rank, one outgoing link, serialised):

.. code-block:: text

    depart  = max(now, link_free)          # wait for earlier messages on the link
    tx      = time to push 8 * nbytes bits at bandwidth beta(t) from depart
    link_free = depart + tx
    arrival = depart + alpha + tx

The sender stamps ``arrival`` in an 8-byte header message (sent on a
duplicate of the communicator, same tag, so headers pair with payloads in
MPI's non-overtaking order); the receiver's request completes only when the
bytes are there *and* ``time.monotonic() >= arrival``; the send request
completes at ``link_free``. All ranks of one host share ``CLOCK_MONOTONIC``,
so stamps compare across ranks (the model assumes a single host). Incoming
links and switch contention are not modelled. Waiting sleeps.

``beta`` is constant or follows a :class:`BandwidthTrace` (e.g. MobiPerf
kbit/s samples replayed one per ``interval_s``, looping), with the trace clock
starting when the transport is built (a collective call).

``bytes_sent`` counts payload bytes exactly (the modelled wire bytes); the
headers are bookkeeping, counted apart in ``header_bytes_sent`` and not
charged to the link.
"""

from __future__ import annotations

import json
import math
import re
import time
from pathlib import Path

import numpy as np
from mpi4py import MPI

from hpcbench.collectives.transport import P2PRequest, Transport, _mpi_buffer
from hpcbench.runtime.wait import Backoff

__all__ = ["BandwidthTrace", "LinkTransport", "parse_rate", "LinkRequest"]

_UNITS = {"": 1.0, "k": 1e3, "m": 1e6, "g": 1e9, "t": 1e12}


def parse_rate(text: str | float) -> float:
    """Bandwidth in bit/s from ``"100Mbit"``, ``"1Gbit"``, ``"10 Gbit/s"``, ``"2.5e9"``...

    Raises
    ------
    ValueError
        If the text is not a positive rate.
    """
    if isinstance(text, (int, float)):
        v = float(text)
    else:
        m = re.fullmatch(r"\s*([0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?)\s*([kKmMgGtT]?)(?:bit|b|bps)?(?:/s)?\s*",
                         str(text))
        if not m:
            raise ValueError(f"bad rate {text!r}: expected e.g. '100Mbit', '1Gbit', '10Gbit'")
        v = float(m.group(1)) * _UNITS[m.group(2).lower()]
    if not (v > 0 and math.isfinite(v)):
        raise ValueError(f"rate must be positive and finite, got {text!r}")
    return v


class BandwidthTrace:
    """Piecewise-constant bandwidth over time, replayed in a loop.

    Parameters
    ----------
    bits_per_s : array_like of float, shape (n,)
        Bandwidth samples in bit/s, each > 0.
    interval_s : float, default 1.0
        How long each sample lasts.
    """

    def __init__(self, bits_per_s, interval_s: float = 1.0) -> None:
        b = np.asarray(bits_per_s, dtype=np.float64).reshape(-1)
        if b.size == 0 or not np.all(np.isfinite(b)) or np.any(b <= 0):
            raise ValueError("bits_per_s must be a non-empty array of positive finite rates")
        if not interval_s > 0:
            raise ValueError(f"interval_s must be > 0, got {interval_s!r}")
        self.bits_per_s = b
        self.interval_s = float(interval_s)
        self.period_s = b.size * self.interval_s
        self._bits_per_period = float(b.sum() * self.interval_s)

    @classmethod
    def from_mobiperf(cls, path, index: int = 0, interval_s: float = 1.0, scale: float = 1.0) -> "BandwidthTrace":
        """Trace from a MobiPerf TCP-speed JSON file (list of records with ``tcp_speed_kbps``).

        Parameters
        ----------
        path : str or pathlib.Path
            The JSON file.
        index : int
            Which record's samples to replay.
        interval_s : float
            Duration of each sample.
        scale : float
            Multiplier applied to the rates (e.g. 1000 to turn a phone link into a datacentre-like one).
        """
        records = json.loads(Path(path).read_text())
        if not isinstance(records, list) or not records:
            raise ValueError(f"{path}: expected a non-empty JSON list of records")
        if not 0 <= index < len(records):
            raise ValueError(f"index must be in [0, {len(records)}), got {index}")
        kbps = records[index].get("tcp_speed_kbps")
        if not kbps:
            raise ValueError(f"{path}: record {index} has no tcp_speed_kbps samples")
        return cls(np.asarray(kbps, dtype=np.float64) * 1e3 * scale, interval_s)

    def rate_at(self, t: float) -> float:
        """Bandwidth (bit/s) at trace time ``t`` seconds."""
        i = int((t % self.period_s) // self.interval_s)
        return float(self.bits_per_s[min(i, self.bits_per_s.size - 1)])

    def transfer_time(self, bits: float, t: float) -> float:
        """Seconds to push ``bits`` starting at trace time ``t``."""
        if bits <= 0:
            return 0.0
        elapsed = 0.0
        full = math.floor(bits / self._bits_per_period)
        if full:
            elapsed += full * self.period_s
            bits -= full * self._bits_per_period
        t = t % self.period_s
        while bits > 0:
            i = min(int(t // self.interval_s), self.bits_per_s.size - 1)
            seg_end = (i + 1) * self.interval_s
            rate = self.bits_per_s[i]
            can = (seg_end - t) * rate
            if can >= bits:
                return elapsed + bits / rate
            bits -= can
            elapsed += seg_end - t
            t = seg_end % self.period_s
        return elapsed


class LinkRequest(P2PRequest):
    """A modelled message: complete when MPI is done and the modelled time has come.

    Parameters
    ----------
    reqs : list of mpi4py.MPI.Request
        ``[header, payload]`` requests.
    nbytes : int
        Payload bytes.
    header : numpy.ndarray or None
        Receives: the 1-element buffer the arrival stamp lands in; sends: None.
    ready_at : float or None
        Sends: the modelled completion (the link is free again); receives: None
        until the header has come.
    keep : object
        Buffers kept alive until completion.
    min_wire : float
        Receives: the least modelled time from departure to arrival of a message of
        ``nbytes`` (latency plus transfer at the highest rate of the link).
    """

    __slots__ = ("_reqs", "_keep", "_header", "_ready_at", "_min_wire")

    def __init__(self, reqs, nbytes: int, header: np.ndarray | None, ready_at: float | None,
                 keep=None, min_wire: float = 0.0) -> None:
        self._reqs = reqs
        self.nbytes = nbytes
        self._done = False
        self._header = header
        self._ready_at = ready_at
        self._keep = keep
        self._min_wire = min_wire

    @property
    def ready_at(self) -> float | None:
        """Monotonic time at which the message completes (receives: known once the header came)."""
        return self._ready_at

    def test(self) -> bool:
        if self._done:
            return True
        if self._reqs:
            if self._ready_at is None:          # receive: the arrival stamp comes first
                if not self._reqs[0].Test():
                    return False
                self._ready_at = float(self._header[0])
                self._reqs = self._reqs[1:]
            if not all(r.Test() for r in self._reqs):
                return False
            self._reqs = []
        self._done = time.monotonic() >= self._ready_at
        return self._done

    def not_before(self, now: float) -> float | None:
        """Earliest monotonic time at which this pending request can complete, when that is
        known without polling MPI; None when it is not (call after ``test()`` returned False).

        * MPI is done: the modelled arrival (or, for a send, the time the link is free).
        * A receive whose arrival stamp has not come: its sender has not posted the
          message yet, so it departs no earlier than ``now`` and arrives no earlier than
          ``now + min_wire``.
        * Otherwise (payload bytes still moving through MPI, which needs polling): None.
        """
        if self._done:
            return now
        if not self._reqs:
            return self._ready_at
        if self._ready_at is None and self._header is not None:
            return now + self._min_wire
        return None

    def wait(self, backoff: Backoff | None = None) -> None:
        backoff = backoff or Backoff(spin=16)
        while not self.test():
            if self._ready_at is not None and not self._reqs:
                time.sleep(max(0.0, self._ready_at - time.monotonic()))
            else:
                backoff.pause()


class LinkTransport(Transport):
    """:class:`Transport` whose messages take the time of a modelled link.

    Collective to construct (duplicates ``comm`` and agrees on the trace clock).

    Parameters
    ----------
    comm : mpi4py.MPI.Comm
    alpha : float, default 0.0
        Per-message latency in seconds, >= 0.
    beta : float or str, default "1Gbit"
        Constant bandwidth in bit/s (or a string for :func:`parse_rate`).
        Ignored when ``trace`` is given.
    trace : BandwidthTrace, optional
        Time-varying bandwidth.

    Attributes
    ----------
    bytes_sent, messages_sent : int
        Payload bytes and messages charged to the link.
    header_bytes_sent : int
        Bytes of arrival-stamp headers (not charged).
    modelled_busy_s : float
        Total modelled transmission time of this rank's link.
    """

    def __init__(self, comm: MPI.Comm, alpha: float = 0.0, beta: float | str = "1Gbit",
                 trace: BandwidthTrace | None = None) -> None:
        super().__init__(comm)
        if not (alpha >= 0 and math.isfinite(alpha)):
            raise ValueError(f"alpha must be a finite latency >= 0 seconds, got {alpha!r}")
        self.alpha = float(alpha)
        self.beta = None if trace is not None else parse_rate(beta)
        self.trace = trace
        self._hdr_comm = comm.Dup()
        self.t0 = float(comm.bcast(time.monotonic(), root=0))
        self.link_free = 0.0
        self.header_bytes_sent = 0
        self.modelled_busy_s = 0.0

    def transfer_time(self, nbytes: int, depart: float) -> float:
        """Modelled seconds to push ``nbytes`` starting at monotonic time ``depart`` (no latency)."""
        bits = 8.0 * nbytes
        if self.trace is not None:
            return self.trace.transfer_time(bits, depart - self.t0)
        return bits / self.beta

    def isend(self, buf: np.ndarray, dest: int, tag: int) -> LinkRequest:
        now = time.monotonic()
        depart = max(now, self.link_free)
        tx = self.transfer_time(buf.nbytes, depart)
        self.link_free = depart + tx
        self.modelled_busy_s += tx
        header = np.array([depart + self.alpha + tx], dtype=np.float64)
        rh = self._hdr_comm.Isend([header, MPI.DOUBLE], dest=dest, tag=tag)
        rb = self.comm.Isend(_mpi_buffer(buf), dest=dest, tag=tag)
        self.bytes_sent += buf.nbytes
        self.messages_sent += 1
        self.header_bytes_sent += header.nbytes
        return LinkRequest([rh, rb], buf.nbytes, None, depart + tx, keep=(header, buf))

    def irecv(self, buf: np.ndarray, source: int, tag: int) -> LinkRequest:
        header = np.empty(1, dtype=np.float64)
        rh = self._hdr_comm.Irecv([header, MPI.DOUBLE], source=source, tag=tag)
        rb = self.comm.Irecv(_mpi_buffer(buf), source=source, tag=tag)
        return LinkRequest([rh, rb], buf.nbytes, header, None, keep=buf,
                           min_wire=self.alpha + 8.0 * buf.nbytes / self.peak_rate)

    @property
    def peak_rate(self) -> float:
        """Highest bandwidth of the link in bit/s (the constant rate, or the trace's maximum)."""
        if self.trace is not None:
            return float(self.trace.bits_per_s.max())
        return self.beta

    def free(self) -> None:
        """Free the duplicated header communicator (collective)."""
        if self._hdr_comm != MPI.COMM_NULL:
            self._hdr_comm.Free()

    def __repr__(self) -> str:
        link = f"trace({self.trace.bits_per_s.size} samples)" if self.trace else f"{self.beta:.3g} bit/s"
        return f"LinkTransport(alpha={self.alpha}, beta={link})"

"""A transport that makes every message take the time a modelled link would take.

Model (per sending rank, one outgoing link, serialised):

.. code-block:: text

    depart  = max(now, link_free)          # wait for earlier messages on the link
    tx      = time to push 8 * nbytes bits at bandwidth beta(t) from depart
    link_free = depart + tx
    arrival = depart + alpha + tx

The sender stamps ``arrival`` (and ``depart + alpha``, when the first byte
arrives, for the traffic meter) in a 16-byte header message (sent on a
duplicate of the communicator, same tag, so headers pair with payloads in
MPI's non-overtaking order); the receiver's request completes only when the
bytes are there *and* ``time.monotonic() >= arrival``; the send request
completes at ``link_free``. All ranks of one host share ``CLOCK_MONOTONIC``,
so stamps compare across ranks (the model assumes a single host). Incoming
links and switch contention are not modelled. Waiting sleeps.

With ``scope="between_hosts"`` the modelled link is the *host's* link to the
other hosts (its network card), shared by the ranks of the host: one
``link_free`` per host, kept in a cell the host's ranks share and updated
under its file lock (:class:`~hpcbench.runtime.hostshared.HostSharedFloat`;
an MPI window lock would wait for the window's owner to enter MPI, which a
sleeping rank does late), so the messages that
several ranks of a host send across at once leave one after the other, as
a network card sends them (the two-level model of
:func:`hpcbench.collectives.linkcost.predict_allreduce_hosts`). With
``scope="all"`` every rank has a link of its own, as above.

``beta`` is constant or follows a :class:`BandwidthReplay` (e.g. one MobiPerf
speed test read by :func:`hpcbench.traces.load_mobiperf`, kbit/s samples
replayed one per ``interval_s``, looping), with the trace clock starting when
the transport is built (a collective call). With a time dilation ``d``
(``dilation=TimeDilation(d)``) every modelled duration above (``alpha``, ``tx``)
lasts ``d`` times longer in wall time.

A slow link (:class:`SlowLink`, KungFu's figure 5 interference) multiplies
one rank's transfer times by a factor from a given step on: the runner tells
the transport each step's number (:meth:`LinkTransport.at_step`), the link
model decides which factor holds; latency is unchanged. Factors are >= 1, so
a receiver's bound on the arrival (its own link's peak rate) stays a bound.

``bytes_sent`` counts payload bytes exactly (the modelled wire bytes); the
headers are bookkeeping, counted apart in ``header_bytes_sent`` and not
charged to the link. With a traffic meter (``transport.meter``, see
:class:`~hpcbench.collectives.transport.Transport`) a send is metered over
``[depart, link_free]`` and a receive over ``[depart + alpha, arrival]``;
with ``scope="between_hosts"`` a message inside the host is metered with
no time on the wire (its bytes count, it says nothing of the link's rate:
the delivered-bandwidth reading, :class:`~hpcbench.telemetry.DeliveryMeter`,
is then the link between hosts alone).
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

import numpy as np
from mpi4py import MPI

from hpcbench import traces as _traces
from hpcbench.collectives.transport import P2PRequest, Transport, _mpi_buffer
from hpcbench.runtime.dilation import NO_DILATION, TimeDilation
from hpcbench.runtime.hostshared import HostSharedFloat
from hpcbench.runtime.units import parse_rate
from hpcbench.runtime.wait import Backoff

__all__ = ["BandwidthReplay", "LinkTransport", "parse_rate", "LinkRequest", "SlowLink", "slowdown_at",
           "STELLATRAIN_WAN_MEANS_BPS"]

#: StellaTrain's fluctuating wide-area settings: mean bandwidth 100 Mbit/s and 500 Mbit/s
STELLATRAIN_WAN_MEANS_BPS = (100e6, 500e6)


@dataclass(frozen=True)
class SlowLink:
    """An injected slow link: rank ``rank``'s outgoing link is ``factor`` times slower from step ``from_step`` on.

    Attributes
    ----------
    rank : int
        Rank (of the transport's communicator) whose sends slow down.
    from_step : int
        First step (the runner's numbering, from 0) with the factor.
    factor : float
        Transfer times are multiplied by it (the bandwidth divided), >= 1;
        latency is unchanged. 1 ends an earlier slowdown.

    Notes
    -----
    KungFu's figure 5 injects interference into one machine's network;
    hpcbench's link model has one outgoing link per rank, so the
    interference slows every message that rank sends (to any peer), not a
    link between two ranks. Messages already departed keep their times.
    """

    rank: int
    from_step: int
    factor: float

    def __post_init__(self) -> None:
        if not (self.rank >= 0 and self.from_step >= 0):
            raise ValueError(f"rank and from_step must be >= 0, got {self.rank}, {self.from_step}")
        if not (self.factor >= 1.0 and math.isfinite(self.factor)):
            raise ValueError(f"factor must be a finite number >= 1, got {self.factor!r}")


def slowdown_at(slow, rank: int, step: int) -> float:
    """The factor rank ``rank``'s transfers take at step ``step``: that of its :class:`SlowLink` with the latest
    ``from_step <= step``, 1.0 where none has begun.

    Examples
    --------
    >>> s = (SlowLink(1, 5, 4.0), SlowLink(1, 9, 1.0))
    >>> [slowdown_at(s, 1, t) for t in (4, 5, 8, 9)], slowdown_at(s, 0, 6)
    ([1.0, 4.0, 4.0, 1.0], 1.0)
    """
    mine = [s for s in slow if s.rank == rank and s.from_step <= step]
    return max(mine, key=lambda s: s.from_step).factor if mine else 1.0


class BandwidthReplay:
    """Piecewise-constant bandwidth over time, replayed in a loop (the link's ``beta(t)``).

    Parameters
    ----------
    bits_per_s : array_like of float, shape (n,)
        Bandwidth samples in bit/s, each > 0.
    interval_s : float, default 1.0
        How long each sample lasts, in modelled seconds.

    Notes
    -----
    Files are read by :mod:`hpcbench.traces` (the one MobiPerf reader, which
    opens the bundled ``.json.gz``); this class only replays one row of such a
    trace (:meth:`from_trace`, :meth:`from_mobiperf`).
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

    @property
    def mean_bps(self) -> float:
        """Time-average bandwidth over one period, bit/s (equal intervals: the samples' mean)."""
        return float(self.bits_per_s.mean())

    def scaled_to_mean(self, mean_bps: float) -> "BandwidthReplay":
        """The same replay with every rate scaled so that :attr:`mean_bps` is ``mean_bps``.

        The shape of the fluctuation (ratios between samples, their timing) is kept.

        Raises
        ------
        ValueError
            ``mean_bps`` not a positive finite rate.
        """
        if not (mean_bps > 0 and math.isfinite(mean_bps)):
            raise ValueError(f"mean_bps must be a positive finite rate, got {mean_bps!r}")
        return BandwidthReplay(self.bits_per_s * (mean_bps / self.mean_bps), self.interval_s)

    @classmethod
    def mobiperf_wan(cls, mean_bps: float, interval_s: float = 1.0, path=None) -> "BandwidthReplay":
        """A fluctuating wide-area link: the MobiPerf speed tests' means, in file order, scaled to ``mean_bps``.

        One sample per speed test (each test's mean, kbit/s -> bit/s), each
        lasting ``interval_s``, then :meth:`scaled_to_mean`. The bundled file
        keeps each test's own samples sorted (their time order is lost, a
        replayed row is a ramp), so the variation used is the one between
        tests: 200 levels for the bundled file, whose coefficient of
        variation the scaling keeps. StellaTrain's settings:
        :data:`STELLATRAIN_WAN_MEANS_BPS` (100 and 500 Mbit/s).

        Parameters
        ----------
        mean_bps : float
            Time-average bandwidth wanted, bit/s.
        interval_s : float
            Modelled seconds each level lasts.
        path : str, optional
            A MobiPerf file (default the bundled one; read by
            :func:`hpcbench.traces.load_mobiperf`, which raises its
            ``TraceError`` on a bad file).

        Raises
        ------
        ValueError
            ``mean_bps`` or ``interval_s`` not positive, or a test whose mean is 0.
        """
        trace = _traces.load_mobiperf(path)
        means = trace.mean_kbps(np.arange(len(trace))) * 1e3
        if np.any(means <= 0):
            raise ValueError(f"{trace.source}: a speed test with a zero mean cannot be replayed")
        return cls(means, interval_s).scaled_to_mean(mean_bps)

    @classmethod
    def from_trace(cls, trace: _traces.BandwidthTrace, index: int = 0, interval_s: float = 1.0,
                   scale: float = 1.0) -> "BandwidthReplay":
        """Replay row ``index`` of a :class:`hpcbench.traces.BandwidthTrace` (kbit/s samples).

        Parameters
        ----------
        trace : hpcbench.traces.BandwidthTrace
            E.g. :func:`hpcbench.traces.load_mobiperf`.
        index : int
            Which row (speed test) to replay.
        interval_s : float
            Duration of each sample.
        scale : float
            Multiplier applied to the rates (e.g. 1000 to turn a phone link
            into a datacentre-like one), > 0.

        Raises
        ------
        ValueError
            ``index`` out of range, ``scale`` not positive, or a zero sample
            in the row (a link that never delivers).
        """
        if not 0 <= index < len(trace):
            raise ValueError(f"index must be in [0, {len(trace)}), got {index}")
        if not (scale > 0 and math.isfinite(scale)):
            raise ValueError(f"scale must be a positive finite number, got {scale!r}")
        kbps = trace.kbps[trace.offsets[index]:trace.offsets[index + 1]]
        if np.any(kbps <= 0):
            raise ValueError(f"{trace.source}: row {index} has a zero bandwidth sample")
        return cls(kbps * 1e3 * scale, interval_s)

    @classmethod
    def from_mobiperf(cls, path=None, index: int = 0, interval_s: float = 1.0,
                      scale: float = 1.0) -> "BandwidthReplay":
        """Replay test ``index`` of a MobiPerf TCP-speed file (``.json`` or ``.json.gz``).

        ``path`` None reads the bundled trace. Read by
        :func:`hpcbench.traces.load_mobiperf` (raises its
        :class:`~hpcbench.traces.TraceError` on a bad file); the row numbering
        is that reader's (tests without samples are left out). Other parameters
        as :meth:`from_trace`.
        """
        return cls.from_trace(_traces.load_mobiperf(path), index, interval_s, scale)

    def rate_at(self, t: float) -> float:
        """Bandwidth (bit/s) at trace time ``t`` seconds."""
        i = int((t % self.period_s) // self.interval_s)
        return float(self.bits_per_s[min(i, self.bits_per_s.size - 1)])

    def mean_rate(self, start: float, end: float) -> float:
        """Time-average bandwidth (bit/s) between trace times ``start`` and ``end`` (the rate at ``start`` when
        ``end <= start``): the piecewise-constant rate integrated exactly."""
        if end <= start:
            return self.rate_at(start)
        iv = self.interval_s
        edges = np.arange(math.floor(start / iv), math.ceil(end / iv) + 1) * iv
        edges = np.clip(edges, start, end)
        widths = np.diff(edges)
        rates = np.array([self.rate_at(0.5 * (a + b)) for a, b in zip(edges[:-1], edges[1:])])
        return float(np.sum(rates * widths) / (end - start))

    def transfer_time(self, bits: float, t: float) -> float:
        """Seconds to push ``bits`` starting at trace time ``t``."""
        if bits <= 0:
            return 0.0
        elapsed = 0.0
        full = math.floor(bits / self._bits_per_period)
        if full:
            elapsed += full * self.period_s
            bits -= full * self._bits_per_period
        n, iv = self.bits_per_s.size, self.interval_s
        t = t % self.period_s
        i = min(int(t // iv), n - 1)
        left = (i + 1) * iv - t         # time left in segment i
        if left <= 0:                   # rounding put t at segment i's end (0.5 // 0.1 == 4.0): go on from the next
            i, left = (i + 1) % n, iv
        while True:                     # segment by index: float times never stall the walk
            rate = self.bits_per_s[i]
            can = left * rate
            if can >= bits:
                return elapsed + bits / rate
            bits -= can
            elapsed += left
            i, left = (i + 1) % n, iv


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
    on_done : callable, optional
        Receives: ``on_done(first_byte, arrival)`` once, at completion, with the
        times the header carried (the traffic meter).
    """

    __slots__ = ("_reqs", "_keep", "_header", "_ready_at", "_min_wire")

    def __init__(self, reqs, nbytes: int, header: np.ndarray | None, ready_at: float | None,
                 keep=None, min_wire: float = 0.0, on_done=None) -> None:
        self._reqs = reqs
        self.nbytes = nbytes
        self._done = False
        self._header = header
        self._ready_at = ready_at
        self._keep = keep
        self._min_wire = min_wire
        self._on_done = on_done

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
        if self._done and self._on_done is not None:
            self._on_done(float(self._header[1]), self._ready_at)
            self._on_done = None
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
    trace : BandwidthReplay, optional
        Time-varying bandwidth.
    slow : sequence of SlowLink, optional
        Injected slow links; the entries of this rank apply from the step
        :meth:`at_step` last named (none before the first call).
    scope : {"all", "between_hosts"}, default "all"
        Which messages take the modelled time: every one, each rank with a
        link of its own, or only those between ranks on different hosts (the
        two-level model: messages inside a host go through MPI as they are,
        shared memory; the ranks of a host share its one modelled link to the
        other hosts, a cell shared by the host's ranks holding when it is
        free next). ``between_hosts`` gathers the host names and, on hosts of
        several ranks, makes that cell (collective, at construction; closed
        by :meth:`free`), and sets :attr:`ranks_per_host`.
    dilation : hpcbench.runtime.dilation.TimeDilation, optional
        Time dilation ``d`` (default none, ``d = 1``): the modelled latency
        and transfer time last ``d`` times longer in wall time (a message
        arrives ``d (alpha + 8 bytes / beta)`` after it departs; the trace is
        replayed on modelled time ``(t - t0) / d``), so that the real CPU work
        of copies and reductions weighs ``d`` times less against them; divide
        measured wall times by ``d`` (``dilation.to_model``) to read them as
        modelled times (Gupta et al., NSDI'06).

    Attributes
    ----------
    bytes_sent, messages_sent : int
        Payload bytes and messages sent (over the link or, with ``scope``
        ``between_hosts``, inside the host).
    link_bytes_sent : int
        Payload bytes charged to the modelled link (``bytes_sent`` with
        ``scope`` ``all``; those to other hosts with ``between_hosts``).
    ranks_per_host : tuple of int
        With ``scope`` ``between_hosts``: the ranks of each host, hosts in
        the order of their lowest rank (the grouping of
        :func:`hpcbench.runtime.hosts.group_ranks`, the one the
        ``hierarchical`` allreduce takes); ``()`` with ``all``.
    hosts_contiguous : bool
        With ``scope`` ``between_hosts``: whether every host holds a block of
        consecutive ranks (Hydra's and srun's block placement), the layout the
        two-level cost model prices; False with ``all``.
    header_bytes_sent : int
        Bytes of arrival-stamp headers (not charged).
    modelled_busy_s : float
        Total modelled transmission time of this rank's link (undilated seconds).
    slowdown : float
        The factor this rank's transfer times take now (1.0: no slow link).
    """

    def __init__(self, comm: MPI.Comm, alpha: float = 0.0, beta: float | str = "1Gbit",
                 trace: BandwidthReplay | None = None,
                 dilation: TimeDilation | None = None, slow=(), scope: str = "all") -> None:
        super().__init__(comm)
        if scope not in ("all", "between_hosts"):
            raise ValueError(f"scope must be 'all' or 'between_hosts', got {scope!r}")
        self.scope = scope
        #: ranks whose messages to and from this rank are not modelled (same host, scope between_hosts)
        self.unmodelled: frozenset[int] = frozenset()
        #: the host's shared link (scope between_hosts, a host of several ranks): when it is free next
        self._card: HostSharedFloat | None = None
        self.ranks_per_host: tuple = ()
        self.hosts_contiguous = False
        if scope == "between_hosts":
            from hpcbench.runtime.hosts import gather_hostnames, group_ranks
            names = gather_hostnames(comm)
            self.unmodelled = frozenset(r for r, h in enumerate(names) if h == names[comm.rank])
            groups = group_ranks(names)
            self.ranks_per_host = tuple(len(g) for g in groups)
            self.hosts_contiguous = [r for g in groups for r in g] == list(range(comm.size))
            self._share_card(comm, sorted(set(names)).index(names[comm.rank]))
        if not (alpha >= 0 and math.isfinite(alpha)):
            raise ValueError(f"alpha must be a finite latency >= 0 seconds, got {alpha!r}")
        if dilation is None:
            dilation = NO_DILATION
        if not isinstance(dilation, TimeDilation):
            raise TypeError(f"dilation: expected a TimeDilation, got {type(dilation).__name__}")
        self.dilation = dilation
        self.alpha = float(alpha)
        self.beta = None if trace is not None else parse_rate(beta)
        self.trace = trace
        self._hdr_comm = comm.Dup()
        self.t0 = float(comm.bcast(time.monotonic(), root=0))
        self.link_free = 0.0
        self.header_bytes_sent = 0
        self.link_bytes_sent = 0
        self.modelled_busy_s = 0.0
        self.slow = tuple(slow)
        self.slowdown = 1.0

    def _share_card(self, comm: MPI.Comm, host: int) -> None:
        """One ``link_free`` for the ranks of host number ``host`` (collective over ``comm``)."""
        local = comm.Split(host, comm.rank)
        err = None
        try:
            if local.size > 1:
                try:
                    self._card = HostSharedFloat(local)
                except RuntimeError as exc:
                    err = f"scope 'between_hosts': the ranks of host {host} cannot share their common link ({exc})"
        finally:
            local.Free()
        errors = [e for e in comm.allgather(err) if e]      # every host raises, none waits in the next collective
        if errors:
            raise RuntimeError(errors[0])

    def _take_link(self, nbytes: int) -> tuple[float, float, float]:
        """Reserve the link for ``nbytes`` from now or when it is free: ``(depart, tx, wall_tx)``, ``tx`` the
        modelled (undilated) transfer seconds; the host's shared link under its lock where there is one."""
        if self._card is None:
            depart = max(time.monotonic(), self.link_free)
            tx = self.transfer_time(nbytes, depart)
            wall_tx = self.dilation.to_wall(tx)
            self.link_free = depart + wall_tx
            return depart, tx, wall_tx
        card = self._card
        with card.locked():
            depart = max(time.monotonic(), card.read())
            tx = self.transfer_time(nbytes, depart)
            wall_tx = self.dilation.to_wall(tx)
            card.write(depart + wall_tx)
        self.link_free = depart + wall_tx
        return depart, tx, wall_tx

    def at_step(self, step: int) -> None:
        """The runner is about to run step ``step``: the slow links' factor for this rank from now on."""
        self.slowdown = slowdown_at(self.slow, self.comm.rank, step) if self.slow else 1.0

    def transfer_time(self, nbytes: int, depart: float) -> float:
        """Modelled seconds to push ``nbytes`` starting at monotonic time ``depart`` (no
        latency, not dilated)."""
        bits = 8.0 * nbytes
        if self.trace is not None:
            return self.slowdown * self.trace.transfer_time(bits, self.dilation.to_model(depart - self.t0))
        return self.slowdown * bits / self.beta

    def isend(self, buf: np.ndarray, dest: int, tag: int) -> P2PRequest:
        if dest in self.unmodelled:
            return super().isend(buf, dest, tag)
        depart, tx, wall_tx = self._take_link(buf.nbytes)
        self.modelled_busy_s += tx
        first = depart + self.dilation.to_wall(self.alpha)
        header = np.array([first + wall_tx, first], dtype=np.float64)     # arrival, first byte's
        if self.meter is not None:
            self.meter.sent(buf.nbytes, depart, depart + wall_tx)
        rh = self._hdr_comm.Isend([header, MPI.DOUBLE], dest=dest, tag=tag)
        rb = self.comm.Isend(_mpi_buffer(buf), dest=dest, tag=tag)
        self.bytes_sent += buf.nbytes
        self.link_bytes_sent += buf.nbytes
        self.messages_sent += 1
        self.header_bytes_sent += header.nbytes
        return LinkRequest([rh, rb], buf.nbytes, None, depart + wall_tx, keep=(header, buf))

    def irecv(self, buf: np.ndarray, source: int, tag: int) -> P2PRequest:
        if source in self.unmodelled:       # inside the host: no time on the modelled link
            meter = self.meter

            def arrived(n):
                now = time.monotonic()
                meter.received(n, now, now)
            return P2PRequest(self.comm.Irecv(_mpi_buffer(buf), source=source, tag=tag), buf.nbytes,
                              arrived if meter is not None else None)
        header = np.empty(2, dtype=np.float64)
        rh = self._hdr_comm.Irecv([header, MPI.DOUBLE], source=source, tag=tag)
        rb = self.comm.Irecv(_mpi_buffer(buf), source=source, tag=tag)
        done = None
        if self.meter is not None:
            meter, n = self.meter, buf.nbytes
            done = lambda first, arrival: meter.received(n, first, arrival)     # noqa: E731
        return LinkRequest([rh, rb], buf.nbytes, header, None, keep=buf,
                           min_wire=self.dilation.to_wall(self.alpha + 8.0 * buf.nbytes
                                                          / self.peak_rate), on_done=done)

    @property
    def peak_rate(self) -> float:
        """Highest bandwidth of the link in bit/s (the constant rate, or the trace's maximum)."""
        if self.trace is not None:
            return float(self.trace.bits_per_s.max())
        return self.beta

    def link_rate(self, start: float, end: float) -> float:
        """The link's mean bandwidth (bit/s) between monotonic times ``start`` and ``end`` (the constant rate,
        or the trace's :meth:`BandwidthReplay.mean_rate` over that modelled span), divided by the slowdown now."""
        if self.trace is None:
            return self.beta / self.slowdown
        to = self.dilation.to_model
        return self.trace.mean_rate(to(start - self.t0), to(end - self.t0)) / self.slowdown

    def free(self) -> None:
        """Free the duplicated header communicator and close the host's shared-link cell (collective)."""
        if self._card is not None:
            self._card, card = None, self._card
            card.close()
        if self._hdr_comm != MPI.COMM_NULL:
            self._hdr_comm.Free()

    def __repr__(self) -> str:
        link = f"trace({self.trace.bits_per_s.size} samples)" if self.trace else f"{self.beta:.3g} bit/s"
        slow = f", slow={list(self.slow)}" if self.slow else ""
        scope = f", scope={self.scope}" if self.scope != "all" else ""
        return f"LinkTransport(alpha={self.alpha}, beta={link}, dilation={self.dilation.factor:g}{slow}{scope})"

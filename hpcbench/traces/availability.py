"""Client availability traces (FLASH format) with vectorised queries."""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Sequence

import numpy as np

from . import _io
from .errors import TraceError

__all__ = ["AvailabilityTrace", "load_flash", "always_available", "FLASH_FILE"]

log = logging.getLogger(__name__)

#: Name of the bundled file (under ``hpcbench/data/traces``).
FLASH_FILE = "flash_availability.json.gz"


@dataclasses.dataclass(frozen=True, eq=False)
class AvailabilityTrace:
    """Availability intervals of ``n`` traces, CSR layout, seconds.

    Intervals of trace ``i`` are ``starts[k], ends[k]`` for
    ``offsets[i] <= k < offsets[i + 1]``: relative to the trace's start,
    within ``[0, duration_s[i]]``, sorted, non-overlapping and closed (a
    client is available at ``t`` iff ``start <= t <= end`` for some interval;
    a zero-length interval is a single available instant). Virtual time ``t``
    maps to ``t mod duration_s[i]``: traces repeat forever.

    Build instances with :meth:`from_intervals` (which sorts, clips and merges)
    or the loaders; the constructor trusts its arguments.

    Attributes
    ----------
    offsets : numpy.ndarray of int64, shape (n + 1,)
        CSR row pointers.
    starts, ends : numpy.ndarray of float64, shape (offsets[-1],)
        Interval bounds in seconds from the trace start.
    duration_s : numpy.ndarray of float64, shape (n,)
        Length of each trace in seconds (> 0), the wrap-around period.
    trace_id : numpy.ndarray of str, shape (n,)
        Client id of each trace in the source file.
    source : str
        File the trace was read from.
    n_excluded : int
        Records left out (e.g. FLASH clients with ``isSuccess`` false).
    """

    offsets: np.ndarray
    starts: np.ndarray
    ends: np.ndarray
    duration_s: np.ndarray
    trace_id: np.ndarray
    source: str = ""
    n_excluded: int = 0
    _gkey: np.ndarray = dataclasses.field(init=False, repr=False)
    _shift: np.ndarray = dataclasses.field(init=False, repr=False)

    def __post_init__(self) -> None:
        n = len(self.duration_s)
        if len(self.offsets) != n + 1 or self.offsets[0] != 0 or self.offsets[-1] != len(self.starts):
            raise ValueError("AvailabilityTrace offsets must have n + 1 entries from 0 to len(starts)")
        if len(self.ends) != len(self.starts) or len(self.trace_id) != n:
            raise ValueError("AvailabilityTrace arrays have inconsistent lengths")
        if n and not np.all(self.duration_s > 0):
            raise ValueError("AvailabilityTrace durations must be > 0")
        # Global offset trick: trace i's times live in [shift_i, shift_i + duration_i]
        # and shift_{i+1} = shift_i + duration_i + 1, so one searchsorted over
        # the concatenated, shifted starts answers queries for any rows.
        # Precision: shifts up to ~1e9 s keep ~1e-7 s resolution.
        shift = np.zeros(n, dtype=np.float64)
        if n > 1:
            np.cumsum(self.duration_s[:-1] + 1.0, out=shift[1:])
        counts = np.diff(self.offsets)
        object.__setattr__(self, "_shift", shift)
        object.__setattr__(self, "_gkey", self.starts + np.repeat(shift, counts))

    # ------------------------------------------------------------------ build
    @classmethod
    def from_intervals(
        cls,
        intervals: Sequence[np.ndarray],
        duration_s: np.ndarray,
        trace_id: Sequence[str] | None = None,
        source: str = "",
        n_excluded: int = 0,
    ) -> AvailabilityTrace:
        """Build from per-trace ``(k, 2)`` arrays of ``[start, end]`` seconds.

        Intervals are clipped to ``[0, duration]``; those ending before 0 or
        starting at or after ``duration`` (the next period's time 0) are
        dropped. They are sorted by start, and overlapping or touching ones
        merged.

        Parameters
        ----------
        intervals : sequence of array_like, each shape (k_i, 2)
            Interval bounds relative to each trace's start, seconds.
        duration_s : array_like of float, shape (n,)
            Trace lengths in seconds (> 0).
        trace_id : sequence of str, optional
            Identifiers (default ``"0" .. "n-1"``).
        source, n_excluded
            Stored as attributes.

        Returns
        -------
        AvailabilityTrace

        Raises
        ------
        ValueError
            On inconsistent lengths, an interval with ``end < start``, or a
            non-positive duration.
        """
        duration = np.asarray(duration_s, dtype=np.float64).reshape(-1)
        n = len(duration)
        if len(intervals) != n:
            raise ValueError(f"{len(intervals)} interval lists for {n} durations")
        if np.any(~(duration > 0)) or np.any(~np.isfinite(duration)):
            raise ValueError("durations must be finite and > 0")
        counts = np.fromiter((len(iv) for iv in intervals), dtype=np.int64, count=n)
        total = int(counts.sum())
        raw = np.empty((total, 2), dtype=np.float64)
        pos = 0
        for iv, c in zip(intervals, counts):
            if c:
                raw[pos:pos + c] = np.asarray(iv, dtype=np.float64).reshape(c, 2)
                pos += c
        if np.any(raw[:, 1] < raw[:, 0]):
            raise ValueError("interval with end < start")
        row = np.repeat(np.arange(n, dtype=np.int64), counts)
        dur = duration[row]
        keep = (raw[:, 1] >= 0) & (raw[:, 0] < dur)
        row, s, e, dur = row[keep], raw[keep, 0], raw[keep, 1], dur[keep]
        s = np.clip(s, 0.0, dur)
        e = np.clip(e, 0.0, dur)
        order = np.lexsort((s, row))
        row, s, e = row[order], s[order], e[order]
        # Merge: an interval starts a new group unless it begins at or before
        # the running max end of earlier intervals of the same trace.
        if len(s):
            new_row = np.r_[True, row[1:] != row[:-1]]
            # exact running max of ends within each trace: rank the ends
            # globally, key = row * total + rank (int64), accumulate, decode
            m = len(e)
            order_e = np.argsort(e, kind="stable")
            rank = np.empty(m, dtype=np.int64)
            rank[order_e] = np.arange(m, dtype=np.int64)
            key = np.maximum.accumulate(row * m + rank)
            runmax = e[order_e[key - row * m]]
            prev_max = np.r_[-np.inf, runmax[:-1]]
            starts_group = new_row | (s > prev_max)
            gs = s[starts_group]
            ge = np.maximum.reduceat(e, np.flatnonzero(starts_group))
            grow = row[starts_group]
        else:
            gs = ge = np.empty(0)
            grow = np.empty(0, dtype=np.int64)
        offsets = np.zeros(n + 1, dtype=np.int64)
        np.cumsum(np.bincount(grow, minlength=n), out=offsets[1:])
        ids = np.asarray([str(i) for i in range(n)] if trace_id is None else list(trace_id), dtype=str)
        return cls(offsets=offsets, starts=np.ascontiguousarray(gs, dtype=np.float64),
                   ends=np.ascontiguousarray(ge, dtype=np.float64), duration_s=duration,
                   trace_id=ids, source=source, n_excluded=n_excluded)

    # ---------------------------------------------------------------- queries
    def __len__(self) -> int:
        return len(self.duration_s)

    def availability_fraction(self) -> np.ndarray:
        """Fraction of each trace's duration that is available (float64, (n,))."""
        per = np.zeros(len(self), dtype=np.float64)
        np.add.at(per, np.repeat(np.arange(len(self)), np.diff(self.offsets)), self.ends - self.starts)
        return per / self.duration_s

    def _locate(self, rows, t_s):
        r = _io.as_rows(rows, len(self))
        t = np.asarray(t_s, dtype=np.float64)
        r, t = np.broadcast_arrays(r, t)
        dur = self.duration_s[r]
        tau = np.mod(t, dur)
        tau = np.where(tau >= dur, 0.0, tau)  # guard fmod rounding up to dur
        # index of the last interval (over all traces) starting at or before tau
        k = np.searchsorted(self._gkey, self._shift[r] + tau, side="right") - 1
        lo = self.offsets[r]
        has = k >= lo  # k may belong to an earlier trace when none starts <= tau
        kc = np.clip(k, 0, max(len(self.starts) - 1, 0))
        return r, t, tau, dur, k, lo, has, kc

    def is_available(self, rows: np.ndarray, t_s) -> np.ndarray:
        """Whether each row's client is available at virtual time ``t_s``.

        Parameters
        ----------
        rows : array_like of int
            Row indices into this trace.
        t_s : float or array_like of float
            Virtual time in seconds; broadcast against ``rows``. Maps to
            ``t mod duration`` within each trace (wrap-around).

        Returns
        -------
        numpy.ndarray of bool
            Broadcast shape of ``rows`` and ``t_s``.

        Raises
        ------
        IndexError
            If a row is out of range.
        """
        r, t, tau, dur, k, lo, has, kc = self._locate(rows, t_s)
        if len(self.starts) == 0:
            return np.zeros(r.shape, dtype=bool)
        return has & (tau <= self.ends[kc])

    def next_available_s(self, rows: np.ndarray, t_s) -> np.ndarray:
        """Earliest virtual time ``>= t_s`` at which each row is available.

        Parameters
        ----------
        rows : array_like of int
            Row indices into this trace.
        t_s : float or array_like of float
            Virtual time in seconds; broadcast against ``rows``.

        Returns
        -------
        numpy.ndarray of float64
            ``t_s`` itself where already available; otherwise the start of the
            next interval, wrapping into the next period of the trace when no
            interval starts later in this one; ``inf`` for a trace without any
            interval.

        Raises
        ------
        IndexError
            If a row is out of range.
        """
        r, t, tau, dur, k, lo, has, kc = self._locate(rows, t_s)
        out = np.full(r.shape, np.inf, dtype=np.float64)
        if len(self.starts) == 0:
            return out
        hi = self.offsets[r + 1]
        avail = has & (tau <= self.ends[kc])
        nxt = np.where(has, k + 1, lo)  # first interval starting after tau
        in_trace = nxt < hi
        nonempty = hi > lo
        nx = np.clip(nxt, 0, len(self.starts) - 1)
        lc = np.clip(lo, 0, len(self.starts) - 1)
        later = t + (self.starts[nx] - tau)
        wrapped = t + (dur - tau) + self.starts[lc]
        out = np.where(nonempty, np.where(in_trace, later, wrapped), np.inf)
        return np.where(avail, t, out)


def always_available(n: int = 1) -> AvailabilityTrace:
    """A trace of ``n`` rows that are available at every time.

    Parameters
    ----------
    n : int
        Number of rows (>= 1); with ``n == 1`` every client can use row 0.

    Returns
    -------
    AvailabilityTrace
        Each row has one interval ``[0, 1]`` over a duration of 1 s.
    """
    if n < 1:
        raise ValueError("always_available needs n >= 1")
    return AvailabilityTrace(
        offsets=np.arange(n + 1, dtype=np.int64),
        starts=np.zeros(n),
        ends=np.ones(n),
        duration_s=np.ones(n),
        trace_id=np.asarray([str(i) for i in range(n)], dtype=str),
        source="always-available",
    )


def load_flash(path: _io.PathLike | None = None) -> AvailabilityTrace:
    """Load FLASH client availability traces (FLHetBench ``flash_availability.json``).

    Parameters
    ----------
    path : str or os.PathLike, optional
        JSON file (``.json`` or ``.json.gz``): ``{"<client>": {"isSuccess",
        "trace_start", "trace_end", "ready_time": [[start, end], ...]}}`` with
        times in seconds. Default: the bundled copy.

    Returns
    -------
    AvailabilityTrace
        One row per client with ``isSuccess`` true, intervals relative to
        ``trace_start`` and ``duration_s = trace_end - trace_start``. Clients
        with ``isSuccess`` false are excluded and counted in ``n_excluded``.

    Raises
    ------
    TraceError
        Missing file, malformed JSON, missing key, wrong type, negative or
        non-finite time, ``trace_end <= trace_start``, an interval with
        ``end < start``, or no client left.
    """
    p = _io.resolve(path, FLASH_FILE)
    data = _io.read_json(p)
    _io.expect(p, "top level", data, dict, "an object of clients")
    ids: list[str] = []
    intervals: list[np.ndarray] = []
    durations: list[float] = []
    n_failed = 0
    for cid, rec in data.items():
        where = f"client {cid!r}"
        ok = _io.expect(p, f"{where}: key 'isSuccess'", _io.get(p, where, rec, "isSuccess"), bool, "a boolean")
        if not ok:
            n_failed += 1
            continue
        t0 = _io.number(p, f"{where}: key 'trace_start'", _io.get(p, where, rec, "trace_start"))
        t1 = _io.number(p, f"{where}: key 'trace_end'", _io.get(p, where, rec, "trace_end"))
        if t1 <= t0:
            raise TraceError(p, f"{where}: key 'trace_end' {t1!r} not after 'trace_start' {t0!r}")
        iv = _io.float_array(p, f"{where}: key 'ready_time'", _io.get(p, where, rec, "ready_time"),
                             "a list of [start, end] pairs")
        if iv.size == 0:
            iv = iv.reshape(0, 2)
        if iv.ndim != 2 or iv.shape[1] != 2:
            raise TraceError(p, f"{where}: key 'ready_time': expected a list of [start, end] pairs")
        if np.any(iv[:, 1] < iv[:, 0]):
            j = int(np.flatnonzero(iv[:, 1] < iv[:, 0])[0])
            raise TraceError(p, f"{where}: key 'ready_time': interval {j} {iv[j].tolist()} has end < start")
        ids.append(cid)
        intervals.append(iv - t0)
        durations.append(t1 - t0)
    if not ids:
        raise TraceError(p, f"empty trace after filtering: {len(data)} clients, {n_failed} with isSuccess false")
    if n_failed:
        log.info("%s: excluded %d clients with isSuccess false", p, n_failed)
    return AvailabilityTrace.from_intervals(intervals, np.asarray(durations), ids,
                                            source=str(p), n_excluded=n_failed)

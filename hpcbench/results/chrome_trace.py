"""Chrome trace JSON of a run: one process per rank, one track per activity, for Perfetto and chrome://tracing.

Each rank records what it did into a :class:`TraceRecorder` (spans on the
tracks ``compute``, ``communication``, ``compression``, ``optimizer``, and
counters such as bandwidth or batch size); the runner gathers the
recorders' events to rank 0 (:func:`gather_events`, a collective on the
communicator it is given) and rank 0 writes one file
(:func:`write_chrome_trace`), by default beside the HDF5 file
(:func:`trace_path_beside`: ``RUN.h5`` -> ``RUN.trace.json``).

The file is the Trace Event Format's JSON object form::

    {"traceEvents": [...], "displayTimeUnit": "ms", "otherData": {...}}

with complete events ``{"name", "cat", "ph": "X", "ts", "dur", "pid", "tid",
"args"}`` (``ts`` and ``dur`` in microseconds from the recorder's origin;
``pid`` the rank), counter events (``"ph": "C"``) and metadata events
(``"ph": "M"``) naming each process ``rank K`` and each thread after its
track. Events of one track that overlap (two sends in flight) go to extra
lanes of that track (``communication 2``...): every thread's spans follow
one another, so they nest as the format requires (:func:`validate`).

This module does not import MPI: :func:`gather_events` uses the
communicator passed to it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Mapping, Sequence

__all__ = ["TRACKS", "TraceRecorder", "gather_events", "chrome_trace", "write_chrome_trace", "write_run_trace",
           "check_trace_setting", "trace_path_beside", "trace_output", "validate"]

#: the tracks every rank has, in display order
TRACKS = ("compute", "communication", "compression", "optimizer")
_LANES = 100        # tid = track index * _LANES + lane


class TraceRecorder:
    """One rank's trace events, in seconds on one clock.

    Parameters
    ----------
    rank : int
        The process (``pid``) of the events.
    origin_s : float, default 0.0
        Clock reading that becomes ``ts = 0`` (e.g. a rank's
        ``dilation.now()`` right after a barrier at the run's start).

    Attributes
    ----------
    events : list of tuple
        ``("X", track, name, start_s, end_s, args)`` and
        ``("C", "", name, t_s, t_s, values)``, in seconds from ``origin_s``;
        plain data, cheap to gather.
    """

    __slots__ = ("rank", "origin_s", "events")

    def __init__(self, rank: int, origin_s: float = 0.0) -> None:
        self.rank = int(rank)
        self.origin_s = float(origin_s)
        self.events: list[tuple] = []

    def span(self, track: str, name: str, start_s: float, end_s: float, **args: Any) -> None:
        """A complete event on ``track`` from ``start_s`` to ``end_s`` (clock seconds, not yet shifted).

        Raises
        ------
        ValueError
            Unknown track, or ``end_s < start_s``.
        """
        if track not in TRACKS:
            raise ValueError(f"unknown track {track!r}; tracks: {', '.join(TRACKS)}")
        if end_s < start_s:
            raise ValueError(f"span {name!r} ends before it starts ({end_s} < {start_s})")
        self.events.append(("X", track, str(name), start_s - self.origin_s, end_s - self.origin_s, args))

    def counter(self, name: str, t_s: float, **values: float) -> None:
        """Counter values (e.g. ``bandwidth_bps=...``) at clock time ``t_s``, drawn as a graph."""
        self.events.append(("C", "", str(name), t_s - self.origin_s, t_s - self.origin_s,
                            {k: float(v) for k, v in values.items()}))


def gather_events(comm, recorder: TraceRecorder) -> list[tuple[int, list[tuple]]] | None:
    """``[(rank, events), ...]`` of every rank on rank 0 of ``comm``, None elsewhere.

    A collective: every rank of ``comm`` must call it (``comm.gather``).
    """
    return comm.gather((recorder.rank, recorder.events), root=0)


def _us(seconds: float) -> float:
    return round(seconds * 1e6, 3)


def _lanes(spans: list[tuple]) -> list[tuple[int, tuple]]:
    """``(lane, span)``: each span in the first lane whose spans all ended by its start (greedy, by start)."""
    ends: list[float] = []
    out = []
    for ev in sorted(spans, key=lambda e: (e[3], e[4])):
        for lane, end in enumerate(ends):
            if end <= ev[3]:
                ends[lane] = ev[4]
                out.append((lane, ev))
                break
        else:
            ends.append(ev[4])
            out.append((len(ends) - 1, ev))
    return out


def chrome_trace(per_rank: Sequence[tuple[int, Sequence[tuple]]], other: Mapping[str, Any] | None = None) -> dict:
    """The trace object of ``[(rank, events), ...]`` (as :func:`gather_events` returns)."""
    events: list[dict] = []
    for rank, evs in sorted(per_rank, key=lambda p: p[0]):
        events.append({"name": "process_name", "ph": "M", "ts": 0, "pid": rank, "tid": 0,
                       "args": {"name": f"rank {rank}"}})
        events.append({"name": "process_sort_index", "ph": "M", "ts": 0, "pid": rank, "tid": 0,
                       "args": {"sort_index": rank}})
        named = set()
        for k, track in enumerate(TRACKS):
            placed = _lanes([e for e in evs if e[0] == "X" and e[1] == track])
            for lane in sorted({lane for lane, _ in placed} | {0}):
                tid = k * _LANES + lane
                named.add(tid)
                label = track if lane == 0 else f"{track} {lane + 1}"
                events.append({"name": "thread_name", "ph": "M", "ts": 0, "pid": rank, "tid": tid,
                               "args": {"name": label}})
                events.append({"name": "thread_sort_index", "ph": "M", "ts": 0, "pid": rank, "tid": tid,
                               "args": {"sort_index": tid}})
            for lane, (_, _, name, start, end, args) in placed:
                events.append({"name": name, "cat": track, "ph": "X", "ts": _us(start),
                               "dur": max(0.0, _us(end) - _us(start)), "pid": rank, "tid": k * _LANES + lane,
                               "args": dict(args)})
        for kind, _, name, t, _, values in evs:
            if kind == "C":
                events.append({"name": name, "ph": "C", "ts": _us(t), "pid": rank, "tid": 0, "args": values})
    return {"traceEvents": events, "displayTimeUnit": "ms", "otherData": dict(other or {})}


def write_chrome_trace(path, per_rank: Sequence[tuple[int, Sequence[tuple]]],
                       other: Mapping[str, Any] | None = None) -> Path:
    """Write :func:`chrome_trace` of ``per_rank`` to ``path`` through a temporary file renamed over it.

    ``path``'s folder must exist (a run's trace path is checked and locked
    with its other outputs: :func:`trace_output`).
    """
    from hpcbench.runtime.outputs import replace_atomically

    text = json.dumps(chrome_trace(per_rank, other), separators=(",", ":"))
    return replace_atomically(path, lambda tmp: tmp.write_text(text, encoding="utf-8"))


def check_trace_setting(v):
    """A runner's ``chrome_trace`` key (true, false or a file path) as it is; ValueError for an empty path (a
    config validator's body)."""
    if isinstance(v, str) and not v.strip():
        raise ValueError("expected true, false or a file path, got an empty string")
    return v


def trace_output(setting, results_path):
    """The run's declared trace output (:class:`hpcbench.runtime.outputs.Output`, key ``chrome_trace``), or None.

    ``setting`` is the runner's ``chrome_trace`` key: false (no trace), true
    (``RUN.trace.json`` beside the results file) or a path.
    """
    from hpcbench.runtime.outputs import Output

    if setting is False or setting is None:
        return None
    return Output("chrome_trace", trace_path_beside(results_path) if setting is True else setting)


def write_run_trace(comm, recorder: TraceRecorder, results, path, runner: str, prog: str) -> None:
    """Gather every rank's events to rank 0 and write them at ``path`` (collective over ``comm``).

    Parameters
    ----------
    recorder : TraceRecorder
        This rank's events.
    results : hpcbench.results.writer.ResultsFile or None
        Rank 0's result file (the trace's path is recorded in its root attribute ``chrome_trace``).
    path : pathlib.Path or None
        Rank 0: the run's checked, locked trace output (``Job.output_path("chrome_trace")``); else None.
    runner, prog : str
        The runner's kind (in the trace's ``otherData``) and the name its message starts with.
    """
    from hpcbench.runtime.wait import sleep_barrier

    sleep_barrier(comm)
    per_rank = gather_events(comm, recorder)
    if comm.rank == 0:
        path = write_chrome_trace(path, per_rank, {"runner": runner, "results": str(results.path),
                                                   "time": "modelled seconds (wall / time_dilation)"})
        results.set_attrs(chrome_trace=str(path))
        print(f"{prog}: Chrome trace {path}")


def trace_path_beside(results_path) -> Path:
    """``RUN.h5`` -> ``RUN.trace.json`` in the same folder."""
    p = Path(results_path)
    return p.with_name(p.stem + ".trace.json")


def validate(trace: Mapping[str, Any]) -> None:
    """Check the structure Perfetto and chrome://tracing need; raise ValueError naming the first fault.

    Checks: a ``traceEvents`` list; every event has ``ph``, ``ts``, ``pid``,
    ``tid``, ``name``; complete events have ``dur >= 0`` and, per
    ``(pid, tid)``, spans that nest or follow one another; every
    ``(pid, tid)`` with spans is named by a ``thread_name`` metadata event.
    """
    evs = trace.get("traceEvents") if isinstance(trace, Mapping) else None
    if not isinstance(evs, list):
        raise ValueError("no traceEvents list")
    named, spans = set(), {}
    for i, e in enumerate(evs):
        for key in ("ph", "ts", "pid", "tid", "name"):
            if key not in e:
                raise ValueError(f"event {i} has no {key!r}: {e}")
        if e["ph"] == "M" and e["name"] == "thread_name":
            named.add((e["pid"], e["tid"]))
        elif e["ph"] == "X":
            if not (isinstance(e.get("dur"), (int, float)) and e["dur"] >= 0):
                raise ValueError(f"event {i} ({e['name']!r}) has no duration >= 0")
            spans.setdefault((e["pid"], e["tid"]), []).append((e["ts"], e["ts"] + e["dur"], e["name"]))
    for key, ss in spans.items():
        if key not in named:
            raise ValueError(f"pid {key[0]} tid {key[1]} has spans but no thread_name")
        stack: list[float] = []
        for start, end, name in sorted(ss, key=lambda s: (s[0], -s[1])):
            while stack and stack[-1] <= start + 1e-3:
                stack.pop()
            if stack and end > stack[-1] + 1e-3:
                raise ValueError(f"pid {key[0]} tid {key[1]}: span {name!r} overlaps another without nesting")
            stack.append(end)

"""FedBuff's buffered asynchronous aggregation, planned on the virtual clock (no MPI, no training).

Nguyen et al., "Federated Learning with Buffered Asynchronous Aggregation"
(AISTATS 2022), Algorithm 1: ``concurrency`` clients train at once, each from
the model version current when it started; the server adds each finished
client's update, scaled by ``s(tau) = 1 / sqrt(1 + tau)`` (``tau``: the
versions applied since the client started), to a buffer and, after
``buffer_size`` (K) updates, applies ``w <- w + eta_g * (sum_k s(tau_k)
Delta_k) / K`` (``Delta``: local minus start parameters) and starts a new
version. A finished client is replaced at once by a newly selected one, which
starts from the version current at that instant (after the update it may have
triggered).

This module is the discrete-event planner: a heap of finish events ordered by
(virtual time, task number). :class:`FedBuffPlanner` hands out one
:class:`ServerUpdate` at a time, naming which tasks (client, start version)
make it up; the MPI loop (:mod:`hpcbench.fl.rounds.fedbuff`) then trains
exactly those, so which rank trains what never changes the result.

Where hpcbench differs from FedScale's ``AsyncAggregator``
(``fedscale/cloud/aggregation/async_aggregator.py``), deliberately:

- FedScale may hand a client a new task while its previous one is in flight
  (it selects among all online clients); here a client is in flight at most
  once (in-flight clients are not candidates).
- FedScale weights by the same ``1 / sqrt(1 + tau)`` but divides by the sum
  of those weights (``update_weight_aggregation``); here by K, as in the
  paper.
- FedScale checks availability at the finish time and then ignores the
  result (its dropout branch is ``pass``); here a client offline at its
  finish time drops out (:meth:`hpcbench.fl.clock.VirtualClock.dropped_out`),
  its update is discarded and its slot refilled.
- Updates staler than ``max_staleness`` are dropped, as FedScale does, and
  recorded; they do not count toward K.
- FedScale keeps the last ``max_staleness + 1`` models; here exactly the
  versions some in-flight client started from (:meth:`needed_versions`).
"""

from __future__ import annotations

import heapq
import math
from dataclasses import dataclass, field

import numpy as np

from hpcbench.fl.output import STATUS_AGGREGATED, STATUS_DROPPED, STATUS_STALE

__all__ = ["staleness_weight", "fedbuff_sum", "Task", "ServerUpdate", "FedBuffPlanner", "STATUS_NAMES"]

STATUS_NAMES = (STATUS_AGGREGATED, STATUS_STALE, STATUS_DROPPED)


def staleness_weight(staleness) -> np.ndarray:
    """FedBuff's staleness scaling ``s(tau) = 1 / sqrt(1 + tau)`` (float64, shape of ``staleness``).

    Raises
    ------
    ValueError
        If a staleness is negative.
    """
    tau = np.asarray(staleness, dtype=np.float64)
    if np.any(tau < 0):
        raise ValueError(f"staleness must be >= 0, got {tau.tolist()}")
    return 1.0 / np.sqrt(1.0 + tau)


def fedbuff_sum(deltas: np.ndarray, staleness: np.ndarray, buffer_size: int) -> np.ndarray:
    """FedBuff's buffered aggregate ``(sum_k s(tau_k) Delta_k) / K`` (float64, shape (P,)).

    Summed in row order in float64 (same rows in the same order, same bits).
    The server then applies ``w <- w + eta_g * result`` (or passes it, as a
    pseudo-gradient, to a server optimizer).

    Parameters
    ----------
    deltas : ndarray of shape (K, P), float32
        Client updates (local minus start parameters), in buffer order.
    staleness : ndarray of shape (K,), int
    buffer_size : int
        K, the divisor (FedBuff divides by K, not by the sum of weights).

    Raises
    ------
    ValueError
        On shape mismatch, an empty buffer, a negative staleness or ``buffer_size < 1``.
    """
    deltas = np.asarray(deltas)
    weights = staleness_weight(staleness)
    if deltas.ndim != 2 or weights.shape != (deltas.shape[0],) or deltas.shape[0] == 0:
        raise ValueError(f"deltas must be (K, P) with K >= 1 and staleness (K,), got {deltas.shape} "
                         f"and {weights.shape}")
    if buffer_size < 1:
        raise ValueError(f"buffer_size must be >= 1, got {buffer_size}")
    out = np.zeros(deltas.shape[1], dtype=np.float64)
    for w, d in zip(weights, deltas):
        out += w * d.astype(np.float64)
    return out / buffer_size


@dataclass
class Task:
    """One client's local training, from its start to its finish (virtual seconds)."""

    task: int
    client_id: int
    start_version: int
    start_s: float
    compute_s: float
    communication_s: float
    status: str = ""
    staleness: int = -1
    applied_in: int = -1

    @property
    def finish_s(self) -> float:
        """Start plus compute plus communication."""
        return self.start_s + self.compute_s + self.communication_s


@dataclass
class ServerUpdate:
    """One applied server update: the buffered tasks, and what else finished since the last one.

    Attributes
    ----------
    version : int
        The model version this update produces (the first is 1; version 0 is the initial model).
    time_s : float
        Virtual time it is applied (the finish time of its K-th buffered task).
    buffered : list of Task
        The K tasks aggregated, in finish order (the summation order).
    stale, dropouts : list of Task
        Tasks that finished since the previous update and were dropped.
    in_flight : int
        Tasks training after the update (its replacement clients included).
    """

    version: int
    time_s: float
    buffered: list = field(default_factory=list)
    stale: list = field(default_factory=list)
    dropouts: list = field(default_factory=list)
    in_flight: int = 0


#: a value of each Task field's type, in field order (for rebuilding tasks from a checkpoint)
_TASK_TYPES = (0, 0, 0, 0.0, 0.0, 0.0, "", 0, 0)


class FedBuffPlanner:
    """Discrete-event FedBuff schedule over the virtual clock's traces.

    Parameters
    ----------
    clock : hpcbench.fl.clock.VirtualClock
        Supplies client times (:meth:`~hpcbench.fl.clock.VirtualClock.client_times`,
        charging its ``down_bytes``/``up_bytes``), availability and dropouts;
        its ``selector`` picks the clients, called as ``select(n, candidates,
        count)`` with ``n`` the selection number (1, 2, ...) in place of a round
        (the loop feeds it back under the same numbering, :attr:`selections`).
    concurrency : int
        Clients in flight at once (>= 1).
    buffer_size : int
        K (>= 1).
    max_staleness : int
        Larger staleness is dropped (>= 0).
    arrival_interval_s : float, default 0
        The k-th client (k = 1, 2, ...) a refill selects starts ``k x
        arrival_interval_s`` virtual seconds after the refill, from the model
        version current at the refill (FedScale's ``arrival_interval``,
        ``examples/async_fl/async_aggregator.py`` before its removal: each
        sampled client's start is the previous one's plus the interval). Its
        slot is taken from the refill on. 0: every client starts at once.

    Notes
    -----
    Each selection draws its clients' times from a generator seeded by
    ``(seed, selection number)``; clients selected together are drawn in
    ascending id order. Everything is a function of the config: every rank
    that ran the planner would get the same schedule (only rank 0 does).
    """

    def __init__(self, clock, concurrency: int, buffer_size: int, max_staleness: int,
                 arrival_interval_s: float = 0.0) -> None:
        if concurrency < 1 or buffer_size < 1 or max_staleness < 0 or not arrival_interval_s >= 0:
            raise ValueError(f"concurrency {concurrency} and buffer_size {buffer_size} must be >= 1, "
                             f"max_staleness {max_staleness} and arrival_interval_s {arrival_interval_s} >= 0")
        self.arrival_interval_s = float(arrival_interval_s)
        self.clock = clock
        self.concurrency = int(concurrency)
        self.buffer_size = int(buffer_size)
        self.max_staleness = int(max_staleness)
        self.version = 0
        self.now_s = 0.0
        self._heap: list[tuple[float, int]] = []
        self._in_flight: dict[int, Task] = {}  # task number -> task
        self._busy: set[int] = set()  # client ids in flight
        self._tasks = 0
        self._selections = 0
        self._buffer: list[Task] = []
        self._stale: list[Task] = []
        self._dropouts: list[Task] = []
        self._seed = int(clock.settings.seed)

    # -- state ----------------------------------------------------------------------------
    def in_flight(self) -> list[Task]:
        """Tasks now training, in task order."""
        return [self._in_flight[k] for k in sorted(self._in_flight)]

    @property
    def selections(self) -> int:
        """Selections made so far (the last ``select`` call's number; 0 before the first)."""
        return self._selections

    def needed_versions(self) -> set[int]:
        """Model versions some in-flight task started from (the ones to keep), current included."""
        return {t.start_version for t in self._in_flight.values()} | {self.version}

    _TASK_FIELDS = ("task", "client_id", "start_version", "start_s", "compute_s", "communication_s",
                    "status", "staleness", "applied_in")

    def state_dict(self) -> dict:
        """The schedule's position: version, virtual time, counters, tasks in flight and the buffer.

        Each task list (``in_flight``, ``buffer``, ``stale``, ``dropouts``) is
        a list of ``[task, client_id, start_version, start_s, compute_s,
        communication_s, status, staleness, applied_in]`` rows (Python
        scalars). Finish events are rebuilt from the in-flight tasks (a heap
        of ``(finish_s, task)`` pops in the same order whatever its layout).
        """
        def rows(tasks):
            return [[getattr(t, f) for f in self._TASK_FIELDS] for t in tasks]

        return {"version": self.version, "now_s": self.now_s, "tasks": self._tasks,
                "selections": self._selections, "in_flight": rows(self.in_flight()),
                "buffer": rows(self._buffer), "stale": rows(self._stale), "dropouts": rows(self._dropouts)}

    def load_state_dict(self, state: dict) -> None:
        """Restore :meth:`state_dict`'s output (continues the schedule bit for bit).

        Raises
        ------
        ValueError
            Missing keys, or more tasks in flight than ``concurrency``.
        """
        want = {"version", "now_s", "tasks", "selections", "in_flight", "buffer", "stale", "dropouts"}
        if set(state) != want:
            raise ValueError(f"FedBuff planner state needs keys {sorted(want)}; got {sorted(state)}")
        if len(state["in_flight"]) > self.concurrency:
            raise ValueError(f"{len(state['in_flight'])} tasks in flight exceed concurrency {self.concurrency}")

        def tasks(rows):
            return [Task(*(type(default)(v) for default, v in zip(_TASK_TYPES, row))) for row in rows]

        self.version, self.now_s = int(state["version"]), float(state["now_s"])
        self._tasks, self._selections = int(state["tasks"]), int(state["selections"])
        self._in_flight = {t.task: t for t in tasks(state["in_flight"])}
        self._busy = {t.client_id for t in self._in_flight.values()}
        self._heap = [(t.finish_s, t.task) for t in self._in_flight.values()]
        heapq.heapify(self._heap)
        self._buffer, self._stale, self._dropouts = (tasks(state[k]) for k in ("buffer", "stale", "dropouts"))

    # -- events ---------------------------------------------------------------------------
    def _candidates(self, t: float) -> np.ndarray:
        rows = self.clock.registry.availability_row
        online = np.flatnonzero(self.clock.availability.is_available(rows, t)).astype(np.int64)
        if self._busy:
            online = online[~np.isin(online, np.fromiter(self._busy, np.int64, len(self._busy)))]
        return online

    def _fill(self) -> None:
        """Start clients in free slots at ``now_s`` (jumping ahead when nobody is online or in flight)."""
        free = self.concurrency - len(self._in_flight)
        if free <= 0:
            return
        candidates = self._candidates(self.now_s)
        if candidates.size == 0 and not self._in_flight:
            idle = np.setdiff1d(np.arange(self.clock.registry.num_clients), np.fromiter(self._busy, np.int64))
            rows = np.unique(self.clock.registry.availability_row[idle])
            nxt = float(np.min(self.clock.availability.next_available_s(rows, self.now_s)))
            if not math.isfinite(nxt):
                raise RuntimeError("no registered client is ever available in the availability trace")
            self.now_s = nxt
            candidates = self._candidates(self.now_s)
        if candidates.size == 0:
            return  # retried at the next finish event
        self._selections += 1
        ids = np.sort(np.asarray(self.clock.selector.select(self._selections, candidates, free), np.int64))
        rng = np.random.default_rng([self._seed, self._selections, 0xFEDB])
        compute, comm = self.clock.client_times(ids, rng)
        for k, (cid, c, m) in enumerate(zip(ids.tolist(), compute.tolist(), comm.tolist()), start=1):
            self._tasks += 1
            start = self.now_s + k * self.arrival_interval_s if self.arrival_interval_s else self.now_s
            task = Task(self._tasks, cid, self.version, start, c, m)
            self._in_flight[task.task] = task
            self._busy.add(cid)
            heapq.heappush(self._heap, (task.finish_s, task.task))

    def next_update(self) -> ServerUpdate:
        """Advance the virtual clock to the next server update and return it.

        Raises
        ------
        RuntimeError
            If no client is ever available (nothing can finish).
        """
        if not self._heap and not self._in_flight:
            self._fill()
        while True:
            if not self._heap:
                self._fill()
                if not self._heap:
                    raise RuntimeError("no client is in flight and none can start")
            finish, number = heapq.heappop(self._heap)
            task = self._in_flight.pop(number)
            self._busy.discard(task.client_id)
            self.now_s = finish
            task.staleness = self.version - task.start_version
            update = None
            if self.clock.dropped_out(np.array([task.client_id]), finish)[0]:
                task.status = STATUS_DROPPED
                self._dropouts.append(task)
            elif task.staleness > self.max_staleness:
                task.status = STATUS_STALE
                self._stale.append(task)
            else:
                task.status = STATUS_AGGREGATED
                self._buffer.append(task)
                if len(self._buffer) == self.buffer_size:
                    self.version += 1
                    for t in self._buffer:
                        t.applied_in = self.version
                    update = ServerUpdate(self.version, finish, self._buffer, self._stale, self._dropouts)
                    self._buffer, self._stale, self._dropouts = [], [], []
            self._fill()
            if update is not None:
                update.in_flight = len(self._in_flight)
                return update

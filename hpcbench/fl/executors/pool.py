"""The executor pool: which ranks train clients in a step, and every message between them and the aggregator.

The only FL code that talks MPI. Rank 0 aggregates; ranks 1..P-1 execute
client tasks (at ``-np 1`` rank 0 executes too). Per step ``s`` (a
synchronous round or a FedBuff server update) the aggregator sends each of
the step's executors one control block on tag ``3s`` (task count, model
count, then the tasks' client ids, shuffle streams, start-model slots and
learning-rate rounds) and the start models on ``3s + 1``, point to point in
eager-sized pieces (:mod:`hpcbench.runtime.chunked`), and wakes it
(:mod:`hpcbench.runtime.wakeup`, for executors on its node); the executor
sends its :class:`~hpcbench.fl.executors.block.ResultBlock` back on ``3s +
2`` (with ``client_updates: summed``, the block's metadata rows and the
weighted sum of its updates, :mod:`hpcbench.fl.executors.sums`). The end of the job is one message on its own tag to every executor.
Every wait polls and sleeps (:mod:`hpcbench.runtime.wait`): an idle rank
leaves the cores to the ranks that train.

Oversubscribed nodes. With more executors on a node than cores (64 ranks on
2 cores), giving every executor a client or two makes dozens of processes
time-slice the cores within each round: each client's training is cut into
many slices and runs ~50 % slower from the cache refills alone. So by
default (``executor_concurrency: cores``) each step uses, per node, only as
many executors as the node has cores available to them (the union of their
CPU affinity masks), chosen in rotation so every executor takes its turn.
``all`` uses every executor each step; a number caps the executors per
node. Which executor trains a task never changes its result.
"""

from __future__ import annotations

import os
import resource
import socket
from dataclasses import dataclass

import numpy as np
from mpi4py import MPI

from hpcbench.fl.engines.base import ClientTasks
from hpcbench.fl.executors.block import META, ResultBlock
from hpcbench.runtime.chunked import irecv_chunked, isend_chunked
from hpcbench.runtime.wait import Backoff, sleep_barrier, sleep_wait, sleep_wait_streams, sleep_waitall
from hpcbench.runtime.wakeup import Waker

__all__ = ["Dispatched", "ExecutorPool", "assign_clients"]

_STOP_TAG = 1  # the end of the job; step s uses tags 3s, 3s+1, 3s+2 (s >= 1)


def assign_clients(client_ids: np.ndarray, work: np.ndarray, executors: list[int]) -> dict[int, np.ndarray]:
    """Split the clients, in ascending id order, into one contiguous run per executor, balanced by work.

    With ``W`` the total expected work and ``k`` executors, client ``i`` (in
    id order) goes to run ``floor(k * (W_before_i + work_i / 2) / W)``: the
    run whose ``1/k`` share of the work holds the client's midpoint, so a
    run's work is at most ``W / k + max(work)``. Run ``j`` goes to
    ``executors[j]``, so the runs, taken in the order of ``executors``, list
    the clients in ascending id order: the aggregator receives each
    executor's updates straight into its rows of the round's id-ordered
    update matrix, with no reordering copy. (Until this version the clients
    were dealt out longest-first, Graham's LPT rule, which interleaved the
    executors' ids; which executor trains a client never changes its result.)

    Parameters
    ----------
    client_ids : ndarray of shape (m,), int64
        Distinct ids.
    work : ndarray of shape (m,)
        Expected cost of each client (e.g. examples processed), >= 0; all
        zero counts every client as one.
    executors : list of int
        Executor ranks.

    Returns
    -------
    dict of int to ndarray
        Executor rank to its client ids (int64, ascending), in the order of
        ``executors``; a run may be empty.
    """
    order = np.argsort(client_ids, kind="stable")
    ids = np.asarray(client_ids, dtype=np.int64)[order]
    w = np.asarray(work, dtype=np.float64)[order]
    if len(w) and w.sum() <= 0:
        w = np.ones(len(w))
    k = len(executors)
    cum = np.cumsum(w)
    run = np.minimum((k * (cum - w / 2) / cum[-1]).astype(np.int64), k - 1) if len(w) else np.zeros(0, np.int64)
    cuts = np.searchsorted(run, np.arange(k + 1))
    return {rank: ids[cuts[j]:cuts[j + 1]] for j, rank in enumerate(executors)}


@dataclass
class Dispatched:
    """A step's sends from the aggregator: one stream of requests per executor, and the buffers they send."""

    streams: list
    buffers: list


class ExecutorPool:
    """The executor ranks of ``comm`` and the aggregator's messages to and from them.

    Collective at construction (every rank learns every rank's host and cores).

    Parameters
    ----------
    comm : mpi4py.MPI.Comm
    concurrency : str or int
        ``executor_concurrency``: ``cores``, ``all`` or executors per node per step.
    num_params : int
        P, the length of a model and of an update.
    capacity : int
        The most tasks one executor is sent in a step (the control block's size).
    summed_weighting : str, optional
        ``client_updates: summed``: executors send their tasks' metadata and the weighted sum of
        their updates (weighted by ``examples`` or ``uniform``; :mod:`hpcbench.fl.executors.sums`)
        in place of every update. None (the default): every update.
    """

    def __init__(self, comm: MPI.Comm, concurrency, num_params: int, capacity: int,
                 summed_weighting: str | None = None) -> None:
        self.comm = comm
        self.rank = comm.rank
        self.world_size = comm.size
        self.num_params = int(num_params)
        self.capacity = int(capacity)
        self.executors = list(range(1, self.world_size)) or [0]
        self.waker = Waker(comm)
        self._nodes = self._placement(concurrency)
        self._models = np.zeros((0, self.num_params), np.float32)
        self._results = ResultBlock.empty(0, self.num_params)
        self.summed_weighting = summed_weighting
        self._meta = np.zeros((0, META))
        self._sum = np.zeros(self.num_params if summed_weighting else 0)
        self._stop_req = None

    # -- who trains ----------------------------------------------------------------------------
    def _placement(self, setting) -> list[tuple[list[int], int]]:
        """Per node: its executor ranks and how many may train at once (collective).

        Also sets ``signal_wakeups``: executors are woken by signal only
        where a step's active executors fit the node's cores. Waking dozens
        of executors at once on a few cores would have them all preempt the
        aggregator and each other; staggered polling serves that case better.
        """
        try:
            cores = frozenset(os.sched_getaffinity(0))
        except AttributeError:  # no affinity API (macOS): count the machine's cores
            cores = frozenset(range(os.cpu_count() or 1))
        from hpcbench.runtime.hosts import group_ranks, hostname

        info = self.comm.allgather((hostname(), cores))
        nodes = []
        self.signal_wakeups = True
        for ranks in group_ranks([host for host, _ in info], self.executors):
            node_cores = len(frozenset().union(*(info[r][1] for r in ranks)))
            if setting == "all":
                k = len(ranks)
            elif setting == "cores":
                k = node_cores
            else:
                k = int(setting)
            k = max(1, min(k, len(ranks)))
            self.signal_wakeups &= k <= node_cores
            nodes.append((ranks, k))
        return nodes

    def active(self, step: int) -> list[int]:
        """Executor ranks that train in ``step``: per node, its next ``k`` in rotation."""
        out = []
        for ranks, k in self._nodes:
            start = ((step - 1) * k) % len(ranks)
            out += [ranks[(start + i) % len(ranks)] for i in range(k)]
        return sorted(out)

    # -- the aggregator's side ----------------------------------------------------------------
    def dispatch(self, step: int, plan: dict[int, ClientTasks]) -> Dispatched:
        """Send each executor of ``plan`` (but rank 0) its tasks and their start models; wake them.

        Point-to-point sends from rank 0 rather than a broadcast tree: an
        executor needs no other rank to forward anything, so a rank that is
        descheduled on an oversubscribed node delays only itself. The models
        go in eager-sized pieces, so the sends complete without waiting for
        executors to wake up. Returns the sends for :meth:`collect`.
        """
        out = Dispatched([], [])
        cap = self.capacity
        for rank, tasks in plan.items():
            if rank == 0:
                continue
            n = len(tasks)
            ctrl = np.zeros(2 + 4 * cap, dtype=np.int64)
            ctrl[0], ctrl[1] = n, len(tasks.models) if n else 0
            for j, column in enumerate((tasks.client_ids, tasks.streams, tasks.slots, tasks.lr_rounds)):
                ctrl[2 + j * cap:2 + j * cap + n] = column
            reqs = [self.comm.Isend(ctrl, dest=rank, tag=3 * step)]
            out.buffers.append(ctrl)
            if n:
                models = np.ascontiguousarray(tasks.models, dtype=np.float32)
                reqs += isend_chunked(self.comm, models, rank, 3 * step + 1)
                out.buffers.append(models)
            out.streams.append(reqs)
        if self.signal_wakeups:  # after every send: a woken executor may preempt this rank
            for rank in plan:
                self.waker.wake(rank)
        return out

    def collect(self, step: int, plan: dict[int, ClientTasks], dest: dict[int, tuple[np.ndarray, np.ndarray]],
                sent: Dispatched) -> None:
        """Receive every planned executor's results into ``dest[rank]``; sleep until they and ``sent`` complete.

        ``dest[rank]`` is ``(meta, updates)``: ``len(plan[rank])`` rows of
        metadata (float64, ``(n, META)``) and of updates (float32, ``(n,
        P)``), views of the caller's block, or with ``summed_weighting`` the
        executor's weighted sum (float64, ``(P,)``) for ``updates``; ``sent``
        is :meth:`dispatch`'s.
        """
        streams = list(sent.streams)
        tag = 3 * step + 2
        for rank, tasks in plan.items():
            if rank == 0 or not len(tasks):
                continue
            meta, updates = dest[rank]
            streams.append(irecv_chunked(self.comm, meta, rank, tag)
                           + irecv_chunked(self.comm, updates, rank, tag))
        wakeable = self.signal_wakeups and all(self.waker.can_wake(rank) for rank in plan if rank != 0)
        sleep_wait_streams(streams, Backoff(max_s=5e-2 if wakeable else 5e-3, sleep=self.waker.sleep))

    def stop(self) -> None:
        """Tell every executor the job is over (after the last step, or at the target)."""
        stop = np.zeros(1, dtype=np.int64)
        reqs = [self.comm.Isend(stop, dest=rank, tag=_STOP_TAG) for rank in self.executors if rank != 0]
        for rank in self.executors:
            self.waker.wake(rank)
        sleep_waitall(reqs)

    # -- the executors' side ------------------------------------------------------------------
    def listen(self) -> None:
        """Executor: start listening for the end of the job (before the first step)."""
        self._stop_buf = np.zeros(1, dtype=np.int64)
        self._stop_req = self.comm.Irecv(self._stop_buf, source=0, tag=_STOP_TAG)

    def _idle_backoff(self) -> Backoff:
        """Executor's sleep schedule while it waits for work: long if the aggregator will wake it."""
        woken = self.signal_wakeups and self.waker.can_wake(0)
        return Backoff(first_s=1e-3, max_s=0.25 if woken else 2e-2, sleep=self.waker.sleep)

    def _await_control(self, ctrl: np.ndarray, tag: int) -> bool:
        """Executor: sleep until rank 0's control block fills ``ctrl`` (True) or the job ends (False)."""
        req = self.comm.Irecv(ctrl, source=0, tag=tag)
        backoff = self._idle_backoff()
        while not req.Test():
            if self._stop_req.Test():
                req.Cancel()
                req.Wait()
                return False
            backoff.pause()
        return True

    def receive(self, step: int) -> ClientTasks | None:
        """Executor: sleep until ``step``'s tasks and start models arrive; None when the job ended first."""
        cap = self.capacity
        ctrl = np.empty(2 + 4 * cap, dtype=np.int64)
        if not self._await_control(ctrl, 3 * step):
            return None
        n, v = int(ctrl[0]), int(ctrl[1])
        if len(self._models) < v:
            self._models = np.empty((v, self.num_params), np.float32)
        models = self._models[:v]
        if n:
            sleep_wait_streams([irecv_chunked(self.comm, models, 0, 3 * step + 1)], Backoff(max_s=1e-3))
        cols = [ctrl[2 + j * cap:2 + j * cap + n].copy() for j in range(4)]
        return ClientTasks(*cols, models)

    def send(self, step: int, meta: np.ndarray, updates: np.ndarray) -> None:
        """Executor: send results to rank 0 (the metadata rows, then the updates or their sum; one stream) and wait."""
        tag = 3 * step + 2
        sends = isend_chunked(self.comm, meta, 0, tag) + isend_chunked(self.comm, updates, 0, tag)
        if self.signal_wakeups:
            self.waker.wake(0)
        sleep_wait_streams([sends])

    def _result_block(self, n: int) -> ResultBlock:
        """Executor: ``n`` rows of the block its results are written into and sent from, kept between steps.

        Grown (never shrunk) to the most rows a step has needed. A new block
        for every step would be mapped anew and faulted in page by page while
        the engine writes the updates; on a virtual machine whose freed pages
        go back to the host that cost 90 ms per 26 MB update (LEAF's CNN),
        15 % of the client's training.
        """
        if len(self._results) < n:
            del self._results  # the old block's memory goes before the new one is faulted in
            self._results = ResultBlock.empty(n, self.num_params)
        return self._results.rows(0, n)

    def serve(self, step: int, engine) -> bool:
        """Executor's part of ``step``: receive, train with ``engine`` (a ClientEngine), send back.

        Every executor active in ``step`` (:meth:`active`) waits for a control
        block, so the aggregator's plan for a step names all of them (an empty
        :class:`~hpcbench.fl.engines.base.ClientTasks` for one without work,
        as :func:`assign_clients` gives). Returns False when the job ended
        before this step's work came.
        """
        if self.rank not in self.active(step):
            return True  # not this executor's turn: no message, no wake-up
        tasks = self.receive(step)
        if tasks is None:
            return False
        if not len(tasks):
            return True
        if self.summed_weighting is None:
            block = self._result_block(len(tasks))
            engine.train(tasks, block)
            self.send(step, block.meta, block.deltas)
        else:
            meta, total = self.train_summed(engine, tasks)
            self.send(step, meta, total)
        return True

    def train_summed(self, engine, tasks: ClientTasks) -> tuple[np.ndarray, np.ndarray]:
        """``client_updates: summed``: train ``tasks`` group by group (:func:`hpcbench.fl.executors.sums.train_summed`).

        Returns the tasks' metadata rows (float64, ``(n, META)``) and the weighted sum of their
        updates (float64, ``(P,)``): this rank's buffers, valid until its next call. Rank 0 calls
        it too where it trains clients (``-np 1``).
        """
        from hpcbench.fl.executors.sums import group_rows, train_summed

        n = len(tasks)
        if len(self._meta) < n:
            self._meta = np.empty((n, META))
        meta = self._meta[:n]
        train_summed(engine, tasks, meta, self._sum, self.summed_weighting,
                     self._result_block(group_rows(self.num_params, n)))
        return meta, self._sum

    def wait_stop(self) -> None:
        """Executor: sleep until the aggregator ends the job."""
        sleep_wait(self._stop_req, self._idle_backoff())

    # -- the end: every rank ------------------------------------------------------------------
    def rank_rows(self, trained: int, train_wall_s: float) -> list | None:
        """Every rank's ``(rank, host, role, max RSS bytes, clients trained, train wall s)`` at rank 0 (collective).

        None on the other ranks.
        """
        role = ("aggregator+executor" if self.world_size == 1 else "aggregator") if self.rank == 0 else "executor"
        mine = (self.rank, socket.gethostname(), role,
                resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024, trained, train_wall_s)
        sleep_barrier(self.comm)
        return self.comm.gather(mine, root=0)


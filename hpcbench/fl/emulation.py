"""The round loop on MPI ranks: rank 0 aggregates, ranks 1..P-1 execute clients.

Per round, the aggregator plans the round (selection, virtual timing,
stragglers and the executor assignment; all seeded), then sends each of the
round's executors its client ids and the global model, point to point, and
wakes it (:mod:`hpcbench.runtime.wakeup`, for executors on its node).
Executors do no planning, so the per-round bookkeeping costs one rank's CPU
however many ranks there are. Each executor trains its clients from the model
and sends one block of updates back in eager-sized pieces
(:mod:`hpcbench.runtime.chunked`), and the aggregator applies FedAvg in
ascending client id order, so the aggregated model has the same bits whatever
the world size. At ``-np 1`` rank 0 executes too. Every wait polls and sleeps
(:mod:`hpcbench.runtime.wait`): an idle rank leaves the cores to the ranks
that train. The end of the job is one message on its own tag to every
executor.

Oversubscribed nodes. With more executors on a node than cores (64 ranks on
2 cores), giving every executor a client or two makes dozens of processes
time-slice the cores within each round: each client's training is cut into
many slices and runs ~50 % slower from the cache refills alone. So by
default (``executor_concurrency: cores``) each round uses, per node, only as
many executors as the node has cores available to them (the union of their
CPU affinity masks), chosen in rotation so every executor takes its turn, and
balances the clients over those by expected work. ``all`` uses every executor
each round; a number caps the executors per node. Which executor trains a
client never changes its result.

Torch is imported only by the torch engines (``client_training``
``sequential`` or ``batched``); with ``numpy``
(:mod:`hpcbench.fl.numpy_training`) no rank imports it. The results tables
(and with them h5py) are imported by rank 0 alone, which writes them.
"""

from __future__ import annotations

import heapq
import json
import math
import os
import resource
import socket
import time
from dataclasses import dataclass, field

import numpy as np
from mpi4py import MPI

from hpcbench.fl.contracts import (STATUS_COMPLETED, STATUS_DROPPED, STATUS_STRAGGLER, ClientUpdates,
                                   RoundFeedback)
from hpcbench.fl.training_result import decayed_learning_rate
from hpcbench.runtime.chunked import irecv_chunked, isend_chunked
from hpcbench.runtime.errors import InputError
from hpcbench.runtime.lifecycle import fault_point
from hpcbench.runtime.wait import Backoff, sleep_barrier, sleep_wait, sleep_wait_streams, sleep_waitall
from hpcbench.runtime.wakeup import Waker

__all__ = ["assign_clients", "Emulation", "Summary"]

_STOP_TAG = 1  # the end of the job; round r uses tags 3r, 3r+1, 3r+2 (r >= 1)
_META = 6  # num_examples, train_loss, train_wall_s, train_cpu_s, utility, global_loss


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
class Summary:
    """End-of-run figures (rank 0)."""

    rounds: int = 0
    final_accuracy: float = math.nan
    time_to_accuracy_s: float = math.nan
    rounds_to_accuracy: int = -1
    wall_s: float = 0.0
    clients_trained: int = 0
    final_parameters: np.ndarray = field(default_factory=lambda: np.zeros(0, np.float32))


class Emulation:
    """One federated job on ``comm``.

    Parameters
    ----------
    cfg : hpcbench.fl.config.FLConfig
    comm : mpi4py.MPI.Comm
    dataset : hpcbench.fl.data.FederatedDataset
    model : torch.nn.Module or hpcbench.fl.models.numpy_mlp.NumpyMLP
        Initial global model (identical on every rank); the numpy twin under
        ``client_training: numpy``.
    clock : hpcbench.fl.clock.VirtualClock
        Holds the :class:`hpcbench.fl.contracts.Selector`, which the aggregator
        rank feeds back every round's per-client outcome.
    aggregator : hpcbench.fl.contracts.Aggregator
        Server optimizer (its client-side term, if any, is applied by the executors).
    server_model : torch.nn.Module or hpcbench.fl.models.numpy_mlp.NumpyMLP, optional
        The model rank 0 takes the initial parameters from and evaluates
        (:attr:`hpcbench.fl.setup.Setup.server_model`); default ``model``.
    """

    def __init__(self, cfg, comm: MPI.Comm, dataset, model, clock, aggregator, server_model=None) -> None:
        self.cfg = cfg
        self.comm = comm
        self.rank = comm.rank
        self.size = comm.size
        self.dataset = dataset
        self.model = model
        self.clock = clock
        self.aggregator = aggregator
        self.executors = list(range(1, self.size)) or [0]
        self._nodes = self._executor_nodes()
        self.waker = Waker(comm)
        self._numpy = cfg.client_training == "numpy"  # the engine this rank trains clients with
        self.server_model = model if server_model is None else server_model
        self._torch = hasattr(self.server_model, "parameters")  # a torch module, not a numpy twin
        self.num_params = (sum(p.numel() for p in self.server_model.parameters()) if self._torch
                           else self.server_model.num_parameters)
        self._model_buf = np.zeros(self.num_params, dtype=np.float32)
        self._cap = math.ceil(cfg.participants * cfg.overcommitment)
        self._trained = 0
        self._train_wall = 0.0
        self._sizes = dataset.client_sizes()
        self._regulariser = aggregator.client_regulariser()
        self.uplink = None  # hpcbench.fl.uplink.UpdateCodec (rank 0 encodes); None: uncompressed
        self.downlink = None
        self.checkpoint_path = None  # rank 0 writes checkpoints there every cfg.checkpoint_interval steps
        self.resume = None  # a loaded checkpoint (hpcbench.fl.checkpoint) to continue from; rank 0 uses it whole
        self.resume_step = 0  # the step it was taken after (every rank)

    # -- who trains ----------------------------------------------------------------------------
    def _executor_nodes(self) -> list[tuple[list[int], int]]:
        """Per node: its executor ranks and how many may train at once (collective, at setup).

        Also sets ``self._signal_wakeups``: executors are woken by signal only
        where a round's active executors fit the node's cores. Waking dozens
        of executors at once on a few cores would have them all preempt the
        aggregator and each other; staggered polling serves that case better.
        """
        try:
            cores = frozenset(os.sched_getaffinity(0))
        except AttributeError:  # no affinity API (macOS): count the machine's cores
            cores = frozenset(range(os.cpu_count() or 1))
        from hpcbench.runtime.hosts import group_ranks, hostname

        info = self.comm.allgather((hostname(), cores))
        setting = self.cfg.executor_concurrency
        nodes = []
        self._signal_wakeups = True
        for ranks in group_ranks([host for host, _ in info], self.executors):
            node_cores = len(frozenset().union(*(info[r][1] for r in ranks)))
            if setting == "all":
                k = len(ranks)
            elif setting == "cores":
                k = node_cores
            else:
                k = int(setting)
            k = max(1, min(k, len(ranks)))
            self._signal_wakeups &= k <= node_cores
            nodes.append((ranks, k))
        return nodes

    def active_executors(self, round_: int) -> list[int]:
        """Executor ranks that train in ``round_``: per node, its next ``k`` in rotation."""
        out = []
        for ranks, k in self._nodes:
            start = ((round_ - 1) * k) % len(ranks)
            out += [ranks[(start + i) % len(ranks)] for i in range(k)]
        return sorted(out)

    # -- one round, every rank --------------------------------------------------------------
    def _plan(self, round_: int):
        timing = self.clock.next_round(round_)
        ids = timing.client_ids[timing.aggregated]
        cfg = self.cfg
        work = cfg.local_steps * np.minimum(cfg.batch_size, self._sizes[ids])
        return timing, assign_clients(ids, work, self.active_executors(round_))

    def _result_block(self, n: int):
        """One byte buffer holding ``n`` clients' metadata then their updates; returns it and both views.

        The two views go as two transfers (:meth:`_send_results`), so that
        the aggregator can receive them into rows of its own arrays.
        """
        meta_bytes = n * _META * 8
        buf = np.empty(meta_bytes + n * self.num_params * 4, dtype=np.uint8)
        meta = buf[:meta_bytes].view(np.float64).reshape(n, _META)
        deltas = buf[meta_bytes:].view(np.float32).reshape(n, self.num_params)
        return buf, deltas, meta

    def learning_rate(self, round_: int) -> float:
        """Client learning rate of ``round_`` (FedScale's step decay; see :func:`decayed_learning_rate`)."""
        cfg = self.cfg
        return decayed_learning_rate(cfg.learning_rate, round_, cfg.decay_factor, cfg.decay_round,
                                     cfg.min_learning_rate)

    def _train_one(self, cid: int, stream: int, global_flat, lr: float, delta: np.ndarray,
                   meta: np.ndarray) -> None:
        """Train client ``cid`` from ``global_flat`` (a torch tensor); write its update and ``_META`` row in place.

        ``stream`` seeds its shuffles with ``cid`` (the round, or FedBuff's task number).
        """
        from hpcbench.fl.training import client_generator, train_client

        cfg = self.cfg
        res = train_client(self.model, global_flat, self.dataset.shard(cid), cfg.local_steps, cfg.batch_size,
                           lr, cfg.momentum, client_generator(cfg.seed, stream, cid), self._regulariser,
                           self.aggregator.needs_global_loss)
        delta[:] = res.delta
        meta[:] = (res.num_examples, res.train_loss, res.train_wall_s, res.train_cpu_s, res.utility,
                   res.global_loss)
        self._train_wall += res.train_wall_s
        self._trained += 1

    def _train(self, ids: np.ndarray, round_: int, global_flat: np.ndarray, deltas: np.ndarray,
               meta: np.ndarray) -> None:
        """Train clients ``ids`` of ``round_`` from ``global_flat`` (float32, shape (P,)) with the config's engine.

        Writes their updates into ``deltas`` (float32, (len(ids), P)) and
        their ``_META`` rows into ``meta`` (float64, (len(ids), 6)), in the
        order of ``ids``.
        """
        lr = self.learning_rate(round_)
        if not len(ids):
            return
        if self._numpy:
            self._train_numpy(ids, round_, global_flat, lr, deltas, meta)
            return
        import torch

        global_flat = torch.from_numpy(global_flat)
        if self.cfg.client_training == "batched":
            self._train_batched(ids, round_, global_flat, lr, deltas, meta)
            return
        for i, cid in enumerate(ids):
            self._train_one(int(cid), round_, global_flat, lr, deltas[i], meta[i])

    def _send_results(self, meta: np.ndarray, deltas: np.ndarray, tag: int) -> None:
        """Executor: send a result block to rank 0 (its metadata, then its updates, one stream) and wait."""
        sends = isend_chunked(self.comm, meta, 0, tag) + isend_chunked(self.comm, deltas, 0, tag)
        if self._signal_wakeups:
            self.waker.wake(0)
        sleep_wait_streams([sends])

    def _train_numpy(self, ids: np.ndarray, stream: int, global_flat: np.ndarray, lr: float,
                     deltas: np.ndarray, meta: np.ndarray) -> None:
        """``client_training: numpy``: train all of ``ids`` in numpy (:mod:`hpcbench.fl.numpy_training`)."""
        from hpcbench.fl.numpy_training import client_rng, train_clients_numpy

        cfg = self.cfg
        shards = [self.dataset.shard_arrays(int(c)) for c in ids]
        rngs = [client_rng(cfg.seed, stream, int(c)) for c in ids]
        results = train_clients_numpy(self.model, global_flat, shards, cfg.local_steps, cfg.batch_size, lr,
                                      cfg.momentum, None, self.aggregator.client_regulariser_gradient(),
                                      self.aggregator.needs_global_loss, out=deltas, rngs=rngs)
        self._store(results, deltas, meta, copy=False)

    def _store(self, results: list, deltas: np.ndarray, meta: np.ndarray, copy: bool = True) -> None:
        """Write a list of :class:`hpcbench.fl.training_result.LocalResult` into the result block's rows.

        ``copy=False``: the updates are already in ``deltas`` (the numpy engine writes them there).
        """
        for i, res in enumerate(results):
            if copy:
                deltas[i] = res.delta
            meta[i] = (res.num_examples, res.train_loss, res.train_wall_s, res.train_cpu_s, res.utility,
                       res.global_loss)
            self._train_wall += res.train_wall_s
        self._trained += len(results)

    def _train_batched(self, ids: np.ndarray, stream: int, global_flat, lr: float,
                       deltas: np.ndarray, meta: np.ndarray) -> None:
        """``client_training: batched``: train all of ``ids`` together (:mod:`hpcbench.fl.batched_training`)."""
        from hpcbench.fl.batched_training import train_clients_batched
        from hpcbench.fl.training import client_generator

        cfg = self.cfg
        results = train_clients_batched(
            self.model, global_flat, [self.dataset.shard(int(c)) for c in ids], cfg.local_steps, cfg.batch_size,
            lr, cfg.momentum, [client_generator(cfg.seed, stream, int(c)) for c in ids], self._regulariser,
            self.aggregator.needs_global_loss)
        self._store(results, deltas, meta)

    def _dispatch(self, round_: int, params: np.ndarray, plan) -> list:
        """Aggregator: send each active executor its client count and ids, and the global model.

        Point-to-point sends from rank 0 rather than a broadcast tree: an
        executor needs no other rank to forward anything, so a rank that is
        descheduled on an oversubscribed node delays only itself. The model
        goes in eager-sized pieces (:mod:`hpcbench.runtime.chunked`), so the
        sends complete without waiting for executors to wake up. Returns one
        stream of requests per executor (for :func:`sleep_wait_streams`).
        """
        streams = []
        for rank, ids in plan.items():
            if rank == 0:
                continue
            ctrl = np.zeros(1 + self._cap, dtype=np.int64)
            ctrl[0] = len(ids)
            ctrl[1:1 + len(ids)] = ids
            reqs = [self.comm.Isend(ctrl, dest=rank, tag=3 * round_)]
            if len(ids):
                reqs += isend_chunked(self.comm, params, rank, 3 * round_ + 1)
            streams.append(reqs)
        if self._signal_wakeups:  # after every send: a woken executor may preempt this rank
            for rank in plan:
                self.waker.wake(rank)
        return streams

    def _stop_executors(self) -> None:
        """Aggregator: tell every executor the job is over (after the last round, or at the target)."""
        stop = np.zeros(1, dtype=np.int64)
        reqs = [self.comm.Isend(stop, dest=rank, tag=_STOP_TAG) for rank in self.executors if rank != 0]
        for rank in self.executors:
            self.waker.wake(rank)
        sleep_waitall(reqs)

    def _idle_backoff(self) -> Backoff:
        """Executor's sleep schedule while it waits for work: long if the aggregator will wake it."""
        woken = self._signal_wakeups and self.waker.can_wake(0)
        return Backoff(first_s=1e-3, max_s=0.25 if woken else 2e-2, sleep=self.waker.sleep)

    def _await_control(self, ctrl: np.ndarray, tag: int, stop_req: MPI.Request) -> bool:
        """Executor: sleep until rank 0's control block fills ``ctrl`` (True) or the job ends (False)."""
        req = self.comm.Irecv(ctrl, source=0, tag=tag)
        backoff = self._idle_backoff()
        while not req.Test():
            if stop_req.Test():
                req.Cancel()
                req.Wait()
                return False
            backoff.pause()
        return True

    def _receive_work(self, round_: int, stop_req: MPI.Request):
        """Executor: sleep until round ``round_``'s work arrives (ids, then the model) or the job ends.

        Returns None when the aggregator stopped the job first.
        """
        ctrl = np.empty(1 + self._cap, dtype=np.int64)
        if not self._await_control(ctrl, 3 * round_, stop_req):
            return None
        if ctrl[0] == 0:
            return np.zeros(0, np.int64)
        sleep_wait_streams([irecv_chunked(self.comm, self._model_buf, 0, 3 * round_ + 1)], Backoff(max_s=1e-3))
        return ctrl[1:1 + ctrl[0]].copy()

    def _collect(self, plan, tag: int, dest: dict, pending: list) -> None:
        """Aggregator: receive every planned executor's results on ``tag`` into ``dest[rank] = (meta, deltas)``.

        ``meta`` and ``deltas`` are C-contiguous arrays of ``len(plan[rank])``
        rows (views of the caller's arrays); sleeps until they and the
        ``pending`` streams of requests (the round's sends) complete.
        """
        streams = list(pending)
        for rank, ids in plan.items():
            if rank == 0 or not len(ids):
                continue
            meta, deltas = dest[rank]
            streams.append(irecv_chunked(self.comm, meta, rank, tag) + irecv_chunked(self.comm, deltas, rank, tag))
        wakeable = self._signal_wakeups and all(self.waker.can_wake(rank) for rank in plan if rank != 0)
        sleep_wait_streams(streams, Backoff(max_s=5e-2 if wakeable else 5e-3, sleep=self.waker.sleep))

    # -- compression (rank 0) ---------------------------------------------------------------
    def broadcast_model(self, params: np.ndarray) -> np.ndarray:
        """The global model as clients receive it: decoded by the downlink codec, or ``params`` itself."""
        if self.downlink is None:
            return params
        return self.downlink.encode(params)[0]

    def encode_updates(self, client_ids: np.ndarray, deltas: np.ndarray) -> np.ndarray:
        """Replace each row of ``deltas`` by what the server decodes from its client's upload, in place.

        Rows are encoded in the given order (each client's residual is its
        own; the order fixes shared compressor state). Returns the uplink
        bytes of each row (int64, shape (m,)).

        Raises
        ------
        RuntimeError
            If a payload's size differs from the size the virtual clock charged.
        """
        nbytes = np.zeros(len(client_ids), np.int64)
        if self.uplink is None:
            nbytes[:] = self.clock.up_bytes
            return nbytes
        for i, cid in enumerate(client_ids):
            deltas[i], nbytes[i] = self.uplink.encode(deltas[i], int(cid))
        if np.any(nbytes != self.clock.up_bytes):
            raise RuntimeError(f"uplink payloads of {sorted(set(nbytes.tolist()))} bytes, but the virtual "
                               f"clock charged {self.clock.up_bytes}")
        return nbytes

    # -- checkpoints (rank 0) -----------------------------------------------------------------
    def _checkpoint(self, step: int, results, tables: dict, params: np.ndarray, summary: Summary, t0: float,
                    stop: bool, **extra) -> None:
        """Write the checkpoint after ``step`` when one is due (see :mod:`hpcbench.fl.checkpoint`).

        ``tables`` maps table names to the open tables (their row counts are
        saved, so a resume truncates what a killed run appended after
        ``step``); ``extra`` holds the mode's own state (FedBuff's planner).
        """
        every = self.cfg.checkpoint_interval
        if self.checkpoint_path is None or not every or step % every:
            return
        from hpcbench.fl.checkpoint import save_checkpoint

        codec = {name: None if c is None else c.state_dict()
                 for name, c in (("uplink", self.uplink), ("downlink", self.downlink))}
        save_checkpoint(self.checkpoint_path, {
            "config": json.dumps(self.cfg.model_dump(), sort_keys=True, default=str), "mode": self.cfg.mode,
            "step": step, "output": str(results.path.resolve()) if results else "",
            "run_id": results.run_id if results else "", "params": params,
            "aggregator": self.aggregator.state_dict(), "selector": self.clock.selector.state_dict(),
            **codec, "clock_now_s": self.clock.now_s, "stop": bool(stop), "wall_s": time.perf_counter() - t0,
            "tables": {name: t.rows for name, t in tables.items()} if results else {},
            "summary": {"rounds": summary.rounds, "final_accuracy": summary.final_accuracy,
                        "time_to_accuracy_s": summary.time_to_accuracy_s,
                        "rounds_to_accuracy": summary.rounds_to_accuracy},
            **extra})

    def _restore(self, results, tables: dict, summary: Summary) -> tuple[np.ndarray, bool, float]:
        """Load ``self.resume`` into the strategies, codecs, clock, ``summary`` and the results file.

        Tables are truncated to the rows they held at the checkpoint and what
        the run writes at its end is removed, so the file continues exactly.
        Returns the global parameters, the stop flag and the wall seconds
        already spent.
        """
        state = self.resume
        self.aggregator.load_state_dict(state["aggregator"])
        self.clock.selector.load_state_dict(state["selector"])
        for name, codec in (("uplink", self.uplink), ("downlink", self.downlink)):
            if codec is not None:
                codec.load_state_dict(state[name])
        self.clock.now_s = float(state["clock_now_s"])
        for key, value in state["summary"].items():
            setattr(summary, key, type(getattr(summary, key))(value))
        if results:
            for name, table in tables.items():
                try:
                    table.truncate(int(state["tables"][name]))
                except (KeyError, ValueError) as exc:
                    raise InputError(f"--resume: results file {str(results.path)!r} does not match the "
                                     f"checkpoint ({exc})") from None
            ends = ("ranks", "model/final_parameters", "final_parameters_sha256")
            for name in ends + (("wall_to_accuracy_s",) if summary.rounds_to_accuracy < 0 else ()):
                results.remove(name)
            results.set_attrs(time_to_accuracy_s=summary.time_to_accuracy_s,
                              rounds_to_accuracy=summary.rounds_to_accuracy, resumed_from_step=self.resume_step)
        params = np.array(state["params"], dtype=np.float32)
        return params, bool(state["stop"]), float(state["wall_s"])

    # -- the loop ---------------------------------------------------------------------------
    def run(self, results=None, progress=None) -> Summary:
        """Run all rounds; rank 0 writes ``results`` (a ResultsFile) and returns the summary."""
        cfg = self.cfg
        summary = Summary()
        t0 = time.perf_counter()
        params = None
        if self.rank == 0:
            params = self.initial_parameters()
            from hpcbench.fl.output import CLIENT_COLUMNS, ROUND_COLUMNS

            rounds_tab = results.table("rounds", ROUND_COLUMNS, "one row per round") if results else None
            clients_tab = results.table("clients", CLIENT_COLUMNS, "one row per selected client per round") \
                if results else None
            x_test, y_test = self.dataset.test_set() if self._torch else self.dataset.test_arrays()
            tables = {"rounds": rounds_tab, "clients": clients_tab}
        stop = False
        if self.rank == 0 and self.resume is not None:
            params, stop, spent = self._restore(results, tables, summary)
            t0 -= spent
        if self.rank != 0:
            self._stop_buf = np.zeros(1, dtype=np.int64)
            stop_req = self.comm.Irecv(self._stop_buf, source=0, tag=_STOP_TAG)
        for round_ in range(self.resume_step + 1, cfg.rounds + 1):
            round_t0 = time.perf_counter()
            fault_point(round_)
            if self.rank != 0:
                if self.rank not in self.active_executors(round_):
                    continue  # not this executor's turn: no message, no wake-up
                mine = self._receive_work(round_, stop_req)
                if mine is None:
                    break
                _, deltas, meta = self._result_block(len(mine))
                self._train(mine, round_, self._model_buf, deltas, meta)
                if len(mine):
                    self._send_results(meta, deltas, 3 * round_ + 2)
                continue
            if stop:
                break
            timing, plan = self._plan(round_)
            sent = self.broadcast_model(params)
            sends = self._dispatch(round_, sent, plan)
            # the plan's runs, in executor order, list the clients in ascending id order: each
            # executor's results land straight in its rows of the round's id-ordered arrays
            ids_all = np.concatenate([np.zeros(0, np.int64), *plan.values()])
            ranks_all = np.concatenate([np.zeros(0, np.int32)]
                                       + [np.full(len(ids), r, np.int32) for r, ids in plan.items()])
            deltas_all = np.empty((len(ids_all), self.num_params), np.float32)
            meta_all = np.empty((len(ids_all), _META))
            dest, pos = {}, 0
            for rank, ids in plan.items():
                dest[rank] = (meta_all[pos:pos + len(ids)], deltas_all[pos:pos + len(ids)])
                pos += len(ids)
            if 0 in plan:
                self._train(plan[0], round_, sent, dest[0][1], dest[0][0])
            self._collect(plan, 3 * round_ + 2, dest, sends)
            up_bytes = self.encode_updates(ids_all, deltas_all)
            train_loss = math.nan
            if len(ids_all):  # a round where every client dropped out leaves the model as it was
                updates = ClientUpdates(ids_all, meta_all[:, 0], meta_all[:, 1], meta_all[:, 5],
                                        self.learning_rate(round_))
                params = self.aggregator.aggregate(params, deltas_all, updates, round_)
                weights = meta_all[:, 0]
                train_loss = float(np.dot(weights, meta_all[:, 1]) / weights.sum())
            utility = self._feedback(round_, timing, ids_all, meta_all)
            acc, loss, stop = self._evaluate(round_, params, timing.end_s, (x_test, y_test), summary, results, t0)
            now = time.perf_counter()
            summary.rounds = round_
            if results:
                self._record(rounds_tab, clients_tab, round_, timing, ids_all, ranks_all, meta_all, utility,
                             acc, loss, train_loss, now - t0, now - round_t0, up_bytes)
            self._checkpoint(round_, results, tables if results else {}, params, summary, t0, stop)
            if progress is not None:
                progress.update(1)
                shown = summary.final_accuracy
                progress.set_postfix(acc=f"{shown:.3f}", vtime=f"{timing.end_s:.0f}s", refresh=False)
        return self._finish(summary, t0, params, results, None if self.rank == 0 else stop_req)

    def initial_parameters(self) -> np.ndarray:
        """The initial global model as a new flat float32 array of shape (P,)."""
        if not self._torch:
            return self.server_model.initial.copy()
        from hpcbench.fl.models import flat_parameters

        return flat_parameters(self.server_model).numpy().copy()

    def _evaluate(self, step: int, params: np.ndarray, vtime_s: float, test_set, summary: Summary, results,
                  t0: float) -> tuple[float, float, bool]:
        """Rank 0: test ``params`` after round (or server update) ``step`` when it is due; note the target.

        Returns ``(accuracy, loss, stop)``: NaN, NaN when not evaluated, and
        ``stop`` True when the target was just reached under ``stop_at_target``.
        """
        cfg = self.cfg
        if step % cfg.eval_interval and step != cfg.rounds:
            return math.nan, math.nan, False
        if not self._torch:
            from hpcbench.fl.numpy_training import evaluate_numpy

            acc, loss = evaluate_numpy(self.server_model, params, *test_set)
        else:
            import torch

            from hpcbench.fl.training import evaluate

            acc, loss = evaluate(self.server_model, torch.from_numpy(params), *test_set)
        summary.final_accuracy = acc
        if acc < cfg.target_accuracy or summary.rounds_to_accuracy >= 0:
            return acc, loss, False
        summary.rounds_to_accuracy = step
        summary.time_to_accuracy_s = vtime_s
        if results:
            results.set_attrs(time_to_accuracy_s=vtime_s, rounds_to_accuracy=step,
                              wall_to_accuracy_s=time.perf_counter() - t0)
        return acc, loss, cfg.stop_at_target

    def _finish(self, summary: Summary, t0: float, params, results, stop_req) -> Summary:
        """Every rank, after the loop: rank 0 stops the executors, executors wait for the stop; rank stats."""
        if self.rank == 0:
            self._stop_executors()
        else:
            sleep_wait(stop_req, self._idle_backoff())
        summary.wall_s = time.perf_counter() - t0
        summary.final_parameters = params if params is not None else summary.final_parameters
        self._gather_rank_stats(results)
        summary.clients_trained = self._trained
        return summary

    def _feedback(self, round_: int, timing, ids_all: np.ndarray, meta_all: np.ndarray) -> np.ndarray:
        """Aggregator: give the selector every selected client's status, duration and utility.

        Status ``completed`` (aggregated), ``dropped`` (offline at its finish
        time) or ``straggler``; duration from the round's start to the
        client's completion. Returns the utility measured per selected client
        (NaN where not trained).
        """
        utility = np.full(len(timing.client_ids), math.nan)
        utility[np.searchsorted(timing.client_ids, ids_all)] = meta_all[:, 4]
        status = np.where(timing.aggregated, STATUS_COMPLETED,
                          np.where(timing.dropped, STATUS_DROPPED, STATUS_STRAGGLER))
        self.clock.selector.feedback(round_, RoundFeedback(
            timing.client_ids, status, timing.completion_s, utility, self._sizes[timing.client_ids]))
        return utility

    def _record(self, rounds_tab, clients_tab, round_, timing, ids_all, ranks_all, meta_all, utility,
                acc, loss, train_loss, wall, round_wall, up_bytes) -> None:
        from hpcbench.fl.output import STATUS_AGGREGATED

        m = len(timing.client_ids)
        rank_of = np.full(m, -1, np.int32)
        loss_c = np.full(m, math.nan)
        wall_c = np.zeros(m)
        cpu_c = np.zeros(m)
        pos = np.searchsorted(timing.client_ids, ids_all)
        rank_of[pos] = ranks_all
        loss_c[pos] = meta_all[:, 1]
        wall_c[pos] = meta_all[:, 2]
        cpu_c[pos] = meta_all[:, 3]
        up_c = np.zeros(m, np.int64)
        up_c[pos] = up_bytes
        clients_tab.append({
            "round": np.full(m, round_), "client_id": timing.client_ids, "executor_rank": rank_of,
            "status": np.where(timing.aggregated, STATUS_AGGREGATED,
                               np.where(timing.dropped, STATUS_DROPPED, STATUS_STRAGGLER)),
            "compute_s": timing.compute_s, "communication_s": timing.communication_s,
            "completion_s": timing.completion_s, "num_examples": self._sizes[timing.client_ids],
            "train_loss": loss_c, "train_wall_s": wall_c, "train_cpu_s": cpu_c, "utility": utility,
            "downlink_bytes": np.full(m, self.clock.down_bytes, np.int64), "uplink_bytes": up_c,
        }, flush=False)
        n_agg = int(timing.aggregated.sum())
        n_drop = int(timing.dropped.sum())
        rounds_tab.append({
            "round": round_, "virtual_time_s": timing.end_s, "round_duration_s": timing.end_s - timing.start_s,
            "wall_time_s": wall, "round_wall_s": round_wall, "test_accuracy": acc, "test_loss": loss,
            "train_loss": train_loss, "online": timing.online, "selected": m, "participants": n_agg,
            "stragglers": m - n_agg - n_drop, "dropouts": n_drop, "learning_rate": self.learning_rate(round_),
        })

    def _gather_rank_stats(self, results) -> None:
        role = ("aggregator+executor" if self.size == 1 else "aggregator") if self.rank == 0 else "executor"
        mine = (self.rank, socket.gethostname(), role,
                resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024, self._trained, self._train_wall)
        sleep_barrier(self.comm)
        rows = self.comm.gather(mine, root=0)
        if self.rank == 0 and results:
            from hpcbench.fl.output import RANK_COLUMNS

            cols = list(zip(*rows))
            results.table("ranks", RANK_COLUMNS, "one row per MPI rank, at the end of the run").append(
                {c.name: list(v) for c, v in zip(RANK_COLUMNS, cols)})

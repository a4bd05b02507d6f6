"""FedBuff rounds on MPI ranks: rank 0 plans and aggregates, executors train batches of tasks.

The loop mirrors the synchronous one (:mod:`hpcbench.fl.emulation`): rank 0
runs the whole virtual clock (:class:`hpcbench.fl.asynchronous.FedBuffPlanner`)
and, for each server update, sends the executors of that batch their tasks
(client id, task number, which model version) and the distinct model versions
those tasks start from, in one block; executors train and send their updates
back. Rank 0 sums them in the planner's buffer order, so the model has the
same bits at any world size. Each task's shuffles come from
``client_generator(seed, task number, client id)``: a client that trains twice
gets two different streams.

Server update. FedBuff's buffered aggregate ``(sum_k s(tau_k) Delta_k) / K``
(:func:`hpcbench.fl.asynchronous.fedbuff_sum`) goes to the configured
aggregator as one pseudo-update of weight 1 (a one-row
:class:`~hpcbench.fl.contracts.ClientUpdates` with client id -1,
``num_examples`` 1 and the buffer's mean training loss):
``aggregator.aggregate(w, aggregate[None, :], updates, version)``. With
``fedavg`` that is ``w <- w + server_learning_rate * aggregate``
(``server_learning_rate`` is FedBuff's ``eta_g``), and a FedOpt server
optimizer (FedAdam, FedYogi, FedAdagrad) treats it as its pseudo-gradient
``Delta_t``, as FedBuff's paper allows ("a server optimizer may follow").
FedProx's proximal term pulls each client toward the version it started
from. q-FedAvg needs per-client losses and is refused in async mode
(:attr:`~hpcbench.fl.contracts.Aggregator.accepts_pseudo_gradient`).

Selection. The planner calls ``selector.select(n, candidates, free)`` with
``n`` the running selection number; at each server update the selector is fed
back, under the planner's latest selection number, every client whose task
finished since the previous update: ``completed`` for the buffered ones (with
the utility measured in their training), ``straggler`` for those dropped as
too stale (not trained, so no utility: Oort credits stragglers with the
mean), ``dropped`` for dropouts; duration is the task's virtual finish minus
start. Oort therefore runs unchanged in async mode. A client that finished
twice since the last update (it dropped out and was selected again) is fed
back once, with its latest task.

Learning rate. A task that starts from version ``v`` trains with the
learning rate of round ``v + 1`` of FedScale's decay (constant by default).

Versions. Rank 0 keeps the model of every version that an in-flight task
started from, as the clients received it (after downlink compression), and
frees a version as soon as no in-flight task needs it
(:meth:`~hpcbench.fl.asynchronous.FedBuffPlanner.needed_versions`); the
``versions_kept`` column records how many were held.
"""

from __future__ import annotations

import math
import time

import numpy as np
import torch

from hpcbench.fl.asynchronous import FedBuffPlanner, fedbuff_sum
from hpcbench.fl.contracts import (STATUS_COMPLETED, STATUS_DROPPED, STATUS_STRAGGLER, ClientUpdates,
                                   RoundFeedback)
from hpcbench.fl.emulation import _META, _STOP_TAG, Emulation, Summary, assign_clients
from hpcbench.fl.output import TASK_COLUMNS, UPDATE_COLUMNS
from hpcbench.runtime.chunked import irecv_chunked, isend_chunked
from hpcbench.runtime.lifecycle import fault_point
from hpcbench.runtime.wait import Backoff, sleep_wait_streams

__all__ = ["AsyncEmulation"]


class AsyncEmulation(Emulation):
    """One FedBuff job on ``comm`` (``mode: async``); same parameters as :class:`Emulation`.

    ``rounds`` counts server updates; batch ``b`` (the tasks of update ``b``)
    uses tags ``3b``, ``3b + 1``, ``3b + 2`` and the executors active in round
    ``b`` of the synchronous rotation.
    """

    def __init__(self, cfg, comm, dataset, model, clock, aggregator, server_model=None) -> None:
        super().__init__(cfg, comm, dataset, model, clock, aggregator, server_model)
        section = cfg.asynchronous
        self.concurrency = section.concurrency or math.ceil(cfg.participants * cfg.overcommitment)
        self.buffer_size = section.buffer_size or cfg.participants
        self._cap = self.buffer_size

    # -- messages -------------------------------------------------------------------------
    def _ctrl(self) -> np.ndarray:
        """Task count, version count, then client ids, task numbers, version slots and start versions
        (``cap`` each)."""
        return np.zeros(2 + 4 * self._cap, dtype=np.int64)

    def _train_tasks(self, ctrl: np.ndarray, models: np.ndarray):
        cap = self._cap
        n = int(ctrl[0])
        buf, deltas, meta = self._result_block(n)
        for i in range(n):
            cid, task, slot, start = (int(ctrl[2 + j * cap + i]) for j in range(4))
            self._train_one(cid, task, torch.from_numpy(models[slot]), self.learning_rate(start + 1),
                            deltas[i], meta[i])
        return buf, deltas, meta

    def _work_for(self, tasks: dict, numbers: np.ndarray, versions: dict):
        """Control block and stacked start models of the tasks ``numbers`` (rank 0)."""
        cap = self._cap
        ctrl = self._ctrl()
        starts = sorted({tasks[k].start_version for k in numbers.tolist()})
        slot = {v: i for i, v in enumerate(starts)}
        ctrl[0], ctrl[1] = len(numbers), len(starts)
        for i, k in enumerate(numbers.tolist()):
            ctrl[2 + i], ctrl[2 + cap + i], ctrl[2 + 2 * cap + i], ctrl[2 + 3 * cap + i] = (
                tasks[k].client_id, k, slot[tasks[k].start_version], tasks[k].start_version)
        models = np.stack([versions[v] for v in starts]) if starts else np.zeros((0, self.num_params), np.float32)
        return ctrl, np.ascontiguousarray(models, dtype=np.float32)

    def _receive_tasks(self, batch: int, stop_req):
        """Executor: the batch's control block and models, or None when the job ended first."""
        ctrl = self._ctrl()
        if not self._await_control(ctrl, 3 * batch, stop_req):
            return None
        models = np.empty((int(ctrl[1]), self.num_params), dtype=np.float32)
        if ctrl[0]:
            sleep_wait_streams([irecv_chunked(self.comm, models, 0, 3 * batch + 1)], Backoff(max_s=1e-3))
        return ctrl, models

    def _execute(self, batch: int, stop_req) -> bool:
        """Executor's part of one batch; False when the job has ended."""
        work = self._receive_tasks(batch, stop_req)
        if work is None:
            return False
        ctrl, models = work
        _, deltas, meta = self._train_tasks(ctrl, models)
        if ctrl[0]:
            self._send_results(meta, deltas, 3 * batch + 2)
        return True

    def _run_batch(self, batch: int, update, versions: dict):
        """Rank 0: train the update's tasks on the batch's executors; (ranks, deltas, meta) in buffer order."""
        tasks = {t.task: t for t in update.buffered}
        numbers = np.array([t.task for t in update.buffered], dtype=np.int64)
        sizes = self._sizes[[t.client_id for t in update.buffered]]
        plan = assign_clients(numbers, self.cfg.local_steps * np.minimum(self.cfg.batch_size, sizes),
                              self.active_executors(batch))
        keep, reqs, blocks = [], [], {}
        for rank, mine in plan.items():
            ctrl, models = self._work_for(tasks, mine, versions)
            if rank == 0:
                blocks[0] = (mine,) + self._train_tasks(ctrl, models)[1:]
                continue
            keep += [ctrl, models]
            stream = [self.comm.Isend(ctrl, dest=rank, tag=3 * batch)]
            if len(mine):
                stream += isend_chunked(self.comm, models, rank, 3 * batch + 1)
            reqs.append(stream)
        if self._signal_wakeups:
            for rank in plan:
                self.waker.wake(rank)
        for rank, mine in plan.items():
            if rank != 0 and len(mine):
                _, d, m = self._result_block(len(mine))
                blocks[rank] = (mine, d, m)
        self._collect(plan, 3 * batch + 2, {rank: (m, d) for rank, (_, d, m) in blocks.items()}, reqs)
        position = {k: i for i, k in enumerate(numbers.tolist())}
        ranks = np.full(len(numbers), -1, np.int32)
        deltas = np.empty((len(numbers), self.num_params), np.float32)
        meta = np.empty((len(numbers), _META))
        for rank, (mine, d, m) in blocks.items():
            for j, k in enumerate(mine.tolist()):
                ranks[position[k]], deltas[position[k]], meta[position[k]] = rank, d[j], m[j]
        del keep
        return ranks, deltas, meta

    # -- the loop -------------------------------------------------------------------------
    def run(self, results=None, progress=None) -> Summary:
        """Run ``rounds`` server updates; rank 0 writes ``results`` and returns the summary."""
        cfg = self.cfg
        summary = Summary()
        t0 = time.perf_counter()
        params = None
        if self.rank != 0:
            self._stop_buf = np.zeros(1, dtype=np.int64)
            stop_req = self.comm.Irecv(self._stop_buf, source=0, tag=_STOP_TAG)
        else:
            from hpcbench.fl.models import flat_parameters
            params = flat_parameters(self.model).numpy().copy()
            versions = {0: self.broadcast_model(params)}
            planner = FedBuffPlanner(self.clock, self.concurrency, self.buffer_size,
                                     cfg.asynchronous.max_staleness, cfg.asynchronous.arrival_interval_s)
            tables = (results.table("rounds", UPDATE_COLUMNS, "one row per applied server update (FedBuff)"),
                      results.table("tasks", TASK_COLUMNS, "one row per finished client task")) \
                if results else None
            test_set = self.dataset.test_set()
        stop = False
        if self.rank == 0 and self.resume is not None:
            params, stop, spent = self._restore(results, self._table_map(tables), summary)
            t0 -= spent
            planner.load_state_dict(self.resume["planner"])
            versions = {int(v): np.array(m, dtype=np.float32) for v, m in self.resume["versions"].items()}
        for batch in range(self.resume_step + 1, cfg.rounds + 1):
            fault_point(batch)
            if self.rank != 0:
                if self.rank in self.active_executors(batch) and not self._execute(batch, stop_req):
                    break
                continue
            if stop:
                break
            update = planner.next_update()
            ranks, deltas, meta = self._run_batch(batch, update, versions)
            cids = np.array([t.client_id for t in update.buffered], np.int64)
            up_bytes = self.encode_updates(cids, deltas)
            staleness = np.array([t.staleness for t in update.buffered], np.int64)
            pseudo = fedbuff_sum(deltas, staleness, self.buffer_size)
            weights = meta[:, 0]
            train_loss = float(np.dot(weights, meta[:, 1]) / weights.sum())
            pseudo_update = ClientUpdates(np.full(1, -1, np.int64), np.ones(1), np.full(1, train_loss),
                                          np.full(1, math.nan), self.learning_rate(batch))
            params = self.aggregator.aggregate(params, pseudo[None, :], pseudo_update, batch)
            utility = self._feedback_update(planner.selections, update, meta)
            versions[batch] = self.broadcast_model(params)
            for v in set(versions) - planner.needed_versions():
                del versions[v]
            acc, loss, stop = self._evaluate(batch, params, update.time_s, test_set, summary, results, t0)
            summary.rounds = batch
            if tables:
                self._record_update(tables, update, ranks, meta, up_bytes, utility, acc, loss, train_loss,
                                    len(versions), time.perf_counter() - t0)
            self._checkpoint(batch, results, self._table_map(tables), params, summary, t0, stop,
                             planner=planner.state_dict(), versions=versions)
            if progress is not None:
                progress.update(1)
                progress.set_postfix(acc=f"{summary.final_accuracy:.3f}", vtime=f"{update.time_s:.0f}s",
                                     refresh=False)
        return self._finish(summary, t0, params, results, None if self.rank == 0 else stop_req)

    @staticmethod
    def _table_map(tables) -> dict:
        """The open tables by name (empty without a results file)."""
        return dict(zip(("rounds", "tasks"), tables)) if tables else {}

    def _feedback_update(self, selection: int, update, meta: np.ndarray) -> np.ndarray:
        """Rank 0: feed the selector every task that finished since the previous server update.

        Buffered tasks are ``completed`` (utility from ``meta``, in buffer
        order), stale ones ``straggler``, dropouts ``dropped``; a client with
        several such tasks is fed back once, with its latest. Returns the
        utility per task in the order buffered, stale, dropouts (NaN: not
        trained).
        """
        rows = update.buffered + update.stale + update.dropouts
        k = len(update.buffered)
        utility = np.concatenate([meta[:, 4], np.full(len(rows) - k, math.nan)])
        status = np.array([STATUS_COMPLETED] * k + [STATUS_STRAGGLER] * len(update.stale)
                          + [STATUS_DROPPED] * len(update.dropouts))
        ids = np.array([t.client_id for t in rows], np.int64)
        finish = np.array([t.finish_s for t in rows])
        duration = finish - np.array([t.start_s for t in rows])
        order = np.lexsort((finish, ids))  # by client, latest task last
        last = order[np.r_[ids[order][1:] != ids[order][:-1], True]]
        self.clock.selector.feedback(selection, RoundFeedback(
            ids[last], status[last], duration[last], utility[last], self._sizes[ids[last]]))
        return utility

    def _record_update(self, tables, update, ranks, meta, up_bytes, utility, acc, loss, train_loss, kept,
                       wall) -> None:
        updates_tab, tasks_tab = tables
        staleness = np.array([t.staleness for t in update.buffered], np.float64)
        updates_tab.append({
            "round": update.version, "virtual_time_s": update.time_s, "wall_time_s": wall,
            "test_accuracy": acc, "test_loss": loss, "train_loss": train_loss,
            "buffered": len(update.buffered), "mean_staleness": float(staleness.mean()),
            "max_staleness": int(staleness.max()), "stale_dropped": len(update.stale),
            "dropouts": len(update.dropouts), "learning_rate": self.learning_rate(update.version + 1),
            "in_flight": update.in_flight, "versions_kept": kept,
        }, flush=False)
        rows = update.buffered + update.stale + update.dropouts
        n, k = len(rows), len(update.buffered)
        tasks_tab.append({
            "task": [t.task for t in rows], "client_id": [t.client_id for t in rows],
            "status": [t.status for t in rows], "start_version": [t.start_version for t in rows],
            "staleness": [t.staleness for t in rows], "applied_in": [t.applied_in for t in rows],
            "start_s": [t.start_s for t in rows], "finish_s": [t.finish_s for t in rows],
            "compute_s": [t.compute_s for t in rows], "communication_s": [t.communication_s for t in rows],
            "executor_rank": np.concatenate([ranks, np.full(n - k, -1, np.int32)]),
            "train_loss": np.concatenate([meta[:, 1], np.full(n - k, math.nan)]),
            "downlink_bytes": np.full(n, self.clock.down_bytes, np.int64),
            "uplink_bytes": np.concatenate([up_bytes, np.zeros(n - k, np.int64)]), "utility": utility,
        })

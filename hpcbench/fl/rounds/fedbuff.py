"""FedBuff rounds (``mode: async``): rank 0 plans and aggregates, executors train batches of tasks.

The loop mirrors the synchronous one (:mod:`hpcbench.fl.rounds.synchronous`): rank 0
runs the whole virtual clock (:class:`hpcbench.fl.asynchronous.FedBuffPlanner`)
and, for each server update, sends the executors of that batch their tasks
(client id, task number, which model version) and the distinct model versions
those tasks start from (:class:`hpcbench.fl.executors.pool.ExecutorPool`); executors train and send their updates
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

from hpcbench.fl.asynchronous import FedBuffPlanner, fedbuff_sum
from hpcbench.fl.contracts import STATUS_COMPLETED, STATUS_DROPPED, STATUS_STRAGGLER, ClientUpdates, RoundFeedback
from hpcbench.fl.engines.base import ClientTasks
from hpcbench.fl.executors.block import ResultBlock
from hpcbench.fl.executors.pool import assign_clients
from hpcbench.fl.rounds.parts import RoundParts, finish, restore, run_executor
from hpcbench.fl.rounds.summary import Summary
from hpcbench.runtime.faults import fault_point

__all__ = ["FedBuffRounds"]


class FedBuffRounds:
    """One FedBuff job; rank 0 writes the ``rounds`` (one row per server update) and ``tasks`` tables.

    ``rounds`` counts server updates; batch ``b`` (the tasks of update ``b``)
    uses the executors active in step ``b`` of the pool's rotation.

    Parameters
    ----------
    parts : hpcbench.fl.rounds.parts.RoundParts
    """

    #: what a step is called in the job's last line
    step_unit = "server updates"

    def __init__(self, parts: RoundParts) -> None:
        self.parts = parts
        self.fedbuff = parts.settings.fedbuff

    @staticmethod
    def capacity(settings) -> int:
        """The most client tasks one executor gets in a server update: the buffer."""
        return settings.fedbuff.buffer_size

    def _tasks_of(self, tasks: dict, numbers: np.ndarray, versions: dict) -> ClientTasks:
        """The tasks ``numbers`` with the distinct model versions they start from."""
        starts = sorted({tasks[k].start_version for k in numbers.tolist()})
        slot = {v: i for i, v in enumerate(starts)}
        ks = numbers.tolist()
        models = (np.stack([versions[v] for v in starts]) if starts
                  else np.zeros((0, self.parts.pool.num_params), np.float32))
        return ClientTasks(np.array([tasks[k].client_id for k in ks], np.int64), np.array(ks, np.int64),
                           np.array([slot[tasks[k].start_version] for k in ks], np.int64),
                           np.array([tasks[k].start_version + 1 for k in ks], np.int64),
                           np.ascontiguousarray(models, dtype=np.float32))

    def _run_batch(self, batch: int, update, versions: dict):
        """Train the update's tasks on the batch's executors; (ranks, block) in buffer order."""
        p = self.parts
        local = p.settings.local
        tasks = {t.task: t for t in update.buffered}
        numbers = np.array([t.task for t in update.buffered], dtype=np.int64)
        sizes = p.client_sizes[[t.client_id for t in update.buffered]]
        assignment = assign_clients(numbers, local.local_steps * np.minimum(local.batch_size, sizes),
                                    p.pool.active(batch))
        plan = {rank: self._tasks_of(tasks, mine, versions) for rank, mine in assignment.items()}
        blocks = {}
        if 0 in plan:
            blocks[0] = ResultBlock.empty(len(plan[0]), p.pool.num_params)
            p.engine.train(plan[0], blocks[0])
        sends = p.pool.dispatch(batch, plan)
        for rank, mine in assignment.items():
            if rank != 0 and len(mine):
                blocks[rank] = ResultBlock.empty(len(mine), p.pool.num_params)
        p.pool.collect(batch, plan, {rank: (b.meta, b.deltas) for rank, b in blocks.items()}, sends)
        position = {k: i for i, k in enumerate(numbers.tolist())}
        ranks = np.full(len(numbers), -1, np.int32)
        out = ResultBlock.collecting(len(numbers), p.pool.num_params)
        for rank, block in blocks.items():
            for j, k in enumerate(assignment[rank].tolist()):
                ranks[position[k]], out.deltas[position[k]], out.meta[position[k]] = rank, block.deltas[j], block.meta[j]
        return ranks, out

    def run(self, recorder) -> Summary:
        """Run ``rounds`` server updates; rank 0 records them with ``recorder`` and returns the summary."""
        p = self.parts
        if p.pool.rank != 0:
            return run_executor(p)
        from hpcbench.fl.output import TASK_COLUMNS, UPDATE_COLUMNS

        summary = Summary()
        t0 = time.perf_counter()
        params = p.evaluator.initial_parameters()
        versions = {0: p.codecs.broadcast(params)}
        fb = self.fedbuff
        planner = FedBuffPlanner(p.clock, fb.concurrency, fb.buffer_size, fb.max_staleness, fb.arrival_interval_s)
        updates_tab = recorder.open("rounds", UPDATE_COLUMNS, "one row per applied server update (FedBuff)")
        tasks_tab = recorder.open("tasks", TASK_COLUMNS, "one row per finished client task")
        params, stop, t0 = restore(p, recorder, summary, params, t0)
        if p.resume is not None:
            planner.load_state_dict(p.resume["planner"])
            versions = {int(v): np.array(m, dtype=np.float32) for v, m in p.resume["versions"].items()}
        for batch in range(p.resume_step + 1, p.settings.rounds.rounds + 1):
            fault_point(batch)
            if stop:
                break
            update = planner.next_update()
            ranks, block = self._run_batch(batch, update, versions)
            cids = np.array([t.client_id for t in update.buffered], np.int64)
            up_bytes = p.codecs.encode_updates(cids, block.deltas)
            staleness = np.array([t.staleness for t in update.buffered], np.int64)
            pseudo = fedbuff_sum(block.deltas, staleness, fb.buffer_size)
            weights = block.num_examples
            train_loss = float(np.dot(weights, block.train_loss) / weights.sum())
            pseudo_update = ClientUpdates(np.full(1, -1, np.int64), np.ones(1), np.full(1, train_loss),
                                          np.full(1, math.nan), p.settings.local.learning_rate_of(batch))
            params = p.aggregator.aggregate(params, pseudo[None, :], pseudo_update, batch)
            utility = self._feedback(planner.selections, update, block)
            versions[batch] = p.codecs.broadcast(params)
            for v in set(versions) - planner.needed_versions():
                del versions[v]
            acc, loss, stop = p.evaluator.evaluate(batch, params, update.time_s, summary, recorder.results, t0)
            summary.rounds = batch
            if recorder.results:
                self._record(updates_tab, tasks_tab, update, ranks, block, up_bytes, utility, acc, loss, train_loss,
                             len(versions), time.perf_counter() - t0)
            p.checkpointer.save(batch, recorder.results, recorder.tables, params, summary, t0, stop,
                                planner=planner.state_dict(), versions=versions)
            recorder.step_done(summary.final_accuracy, update.time_s)
        return finish(p, summary, t0, params, recorder)

    def _feedback(self, selection: int, update, block: ResultBlock) -> np.ndarray:
        """Feed the selector every task that finished since the previous server update.

        Buffered tasks are ``completed`` (utility from ``block``, in buffer
        order), stale ones ``straggler``, dropouts ``dropped``; a client with
        several such tasks is fed back once, with its latest. Returns the
        utility per task in the order buffered, stale, dropouts (NaN: not
        trained).
        """
        p = self.parts
        rows = update.buffered + update.stale + update.dropouts
        k = len(update.buffered)
        utility = np.concatenate([block.utility, np.full(len(rows) - k, math.nan)])
        status = np.array([STATUS_COMPLETED] * k + [STATUS_STRAGGLER] * len(update.stale)
                          + [STATUS_DROPPED] * len(update.dropouts))
        ids = np.array([t.client_id for t in rows], np.int64)
        finish_s = np.array([t.finish_s for t in rows])
        duration = finish_s - np.array([t.start_s for t in rows])
        order = np.lexsort((finish_s, ids))  # by client, latest task last
        last = order[np.r_[ids[order][1:] != ids[order][:-1], True]]
        p.clock.selector.feedback(selection, RoundFeedback(
            ids[last], status[last], duration[last], utility[last], p.client_sizes[ids[last]]))
        return utility

    def _record(self, updates_tab, tasks_tab, update, ranks, block, up_bytes, utility, acc, loss, train_loss, kept,
                wall) -> None:
        p = self.parts
        staleness = np.array([t.staleness for t in update.buffered], np.float64)
        updates_tab.append({
            "round": update.version, "virtual_time_s": update.time_s, "wall_time_s": wall,
            "test_accuracy": acc, "test_loss": loss, "train_loss": train_loss,
            "buffered": len(update.buffered), "mean_staleness": float(staleness.mean()),
            "max_staleness": int(staleness.max()), "stale_dropped": len(update.stale),
            "dropouts": len(update.dropouts), "learning_rate": p.settings.local.learning_rate_of(update.version + 1),
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
            "train_loss": np.concatenate([block.train_loss, np.full(n - k, math.nan)]),
            "downlink_bytes": np.full(n, p.clock.down_bytes, np.int64),
            "uplink_bytes": np.concatenate([up_bytes, np.zeros(n - k, np.int64)]), "utility": utility,
        })

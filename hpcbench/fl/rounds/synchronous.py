"""Synchronous rounds (``mode: sync``): rank 0 plans each round, executors train its clients, FedAvg-style aggregation.

Per round, the aggregator plans the round (selection, virtual timing,
stragglers and the executor assignment; all seeded), then sends each of the
round's executors its client ids and the global model
(:class:`hpcbench.fl.executors.pool.ExecutorPool`). Executors do no planning,
so the per-round bookkeeping costs one rank's CPU however many ranks there
are. The aggregator applies its aggregator to the updates in ascending
client id order, so the aggregated model has the same bits whatever the
world size. With ``client_updates: summed`` each executor sends the weighted
sum of its clients' updates instead (:mod:`hpcbench.fl.executors.sums`), and
their mean goes to the aggregator as one pseudo-update: less memory and
traffic, bits that depend on the executor split. At ``-np 1`` rank 0
executes too.
"""

from __future__ import annotations

import math
import time

import numpy as np

from hpcbench.fl.aggregation.fedavg import example_weights
from hpcbench.fl.contracts import STATUS_COMPLETED, STATUS_DROPPED, STATUS_STRAGGLER, ClientUpdates, RoundFeedback
from hpcbench.fl.engines.base import ClientTasks
from hpcbench.fl.executors.block import ResultBlock
from hpcbench.fl.executors.pool import assign_clients
from hpcbench.fl.rounds.parts import RoundParts, finish, restore, run_executor
from hpcbench.fl.rounds.summary import Summary
from hpcbench.runtime.faults import fault_point

__all__ = ["SynchronousRounds"]


class SynchronousRounds:
    """FedScale's synchronous rounds; rank 0 writes the ``rounds`` and ``clients`` tables.

    Parameters
    ----------
    parts : hpcbench.fl.rounds.parts.RoundParts
    """

    #: what a step is called in the job's last line
    step_unit = "rounds"

    def __init__(self, parts: RoundParts) -> None:
        self.parts = parts
        summed = parts.pool.summed_weighting is not None
        # with client_updates: summed the block holds only metadata rows (its updates have no columns)
        self._block = ResultBlock.collecting(0, 0 if summed else parts.pool.num_params)
        self._sums = np.zeros((0, parts.pool.num_params))

    def _collecting(self, n: int, executors: int) -> tuple[ResultBlock, np.ndarray | None]:
        """``n`` rows of the round's id-ordered block, and with ``client_updates: summed`` one sum per executor.

        Kept from round to round (grown, never shrunk): a new block per round
        would be faulted in page by page as the updates arrive (90 ms per 26
        MB update where freed pages go back to a virtual machine's host). The
        round's aggregation reads them and returns new arrays; nothing keeps a
        view of them past the round. With ``summed`` the block's updates have
        no columns and the sums are float64, ``(executors, P)``; else the
        sums are None.
        """
        if len(self._block) < n:
            columns = self._block.deltas.shape[1]
            self._block = None
            self._block = ResultBlock.collecting(n, columns)
        if self.parts.pool.summed_weighting is None:
            return self._block.rows(0, n), None
        if len(self._sums) < executors:
            self._sums = np.empty((executors, self.parts.pool.num_params))
        return self._block.rows(0, n), self._sums[:executors]

    def _train_here(self, tasks: ClientTasks, dest: tuple[np.ndarray, np.ndarray]) -> None:
        """Rank 0's own clients (``-np 1``), into its rows (or its sum) of the round's block."""
        p = self.parts
        meta, updates = dest
        if p.pool.summed_weighting is None:
            p.engine.train(tasks, ResultBlock(meta, updates))
            return
        mine, total = p.pool.train_summed(p.engine, tasks)
        meta[:] = mine
        updates[:] = total

    def _aggregate_sums(self, params: np.ndarray, block: ResultBlock, sums: np.ndarray, train_loss: float,
                        lr: float, round_: int) -> np.ndarray:
        """``client_updates: summed``: the executors' sums, added in executor order and divided by the total
        weight, go to the aggregator as one pseudo-update of weight 1 (as FedBuff's buffered sum does)."""
        p = self.parts
        total = sums[0].copy()
        for row in sums[1:]:
            total += row
        mean = (total / example_weights(block.num_examples, p.pool.summed_weighting).sum()).astype(np.float32)
        pseudo = ClientUpdates(np.full(1, -1, np.int64), np.ones(1), np.full(1, train_loss), np.full(1, math.nan),
                               lr)
        return p.aggregator.aggregate(params, mean[None, :], pseudo, round_)

    @staticmethod
    def capacity(settings) -> int:
        """The most client tasks one executor gets in a round: every selected client."""
        return settings.rounds.selected

    def _plan(self, round_: int):
        p = self.parts
        timing = p.clock.next_round(round_)
        ids = timing.client_ids[timing.aggregated]
        local = p.settings.local
        work = local.local_steps * np.minimum(local.batch_size, p.client_sizes[ids])
        return timing, assign_clients(ids, work, p.pool.active(round_))

    def run(self, recorder) -> Summary:
        """Run all rounds; rank 0 records them with ``recorder`` and returns the summary."""
        p = self.parts
        if p.pool.rank != 0:
            return run_executor(p)
        from hpcbench.fl.output import CLIENT_COLUMNS, ROUND_COLUMNS

        summary = Summary()
        t0 = time.perf_counter()
        params = p.evaluator.initial_parameters()
        rounds_tab = recorder.open("rounds", ROUND_COLUMNS, "one row per round")
        clients_tab = recorder.open("clients", CLIENT_COLUMNS, "one row per selected client per round")
        params, stop, t0 = restore(p, recorder, summary, params, t0)
        for round_ in range(p.resume_step + 1, p.settings.rounds.rounds + 1):
            round_t0 = time.perf_counter()
            fault_point(round_)
            if stop:
                break
            timing, assignment = self._plan(round_)
            sent = p.codecs.broadcast(params)
            plan = {rank: ClientTasks.one_model(ids, round_, sent) for rank, ids in assignment.items()}
            sends = p.pool.dispatch(round_, plan)
            # the plan's runs, in executor order, list the clients in ascending id order: each
            # executor's results land straight in its rows of the round's id-ordered block
            ids_all = np.concatenate([np.zeros(0, np.int64), *assignment.values()])
            ranks_all = np.concatenate([np.zeros(0, np.int32)]
                                       + [np.full(len(ids), r, np.int32) for r, ids in assignment.items()])
            block, sums = self._collecting(len(ids_all), len(assignment))
            dest, pos = {}, 0
            for j, (rank, ids) in enumerate(assignment.items()):
                rows = block.rows(pos, pos + len(ids))
                dest[rank] = (rows.meta, rows.deltas if sums is None else sums[j])
                pos += len(ids)
            if 0 in plan:
                self._train_here(plan[0], dest[0])
            p.pool.collect(round_, plan, dest, sends)
            up_bytes = p.codecs.encode_updates(ids_all, block.deltas)
            train_loss = math.nan
            lr = p.settings.local.learning_rate_of(round_)
            if len(ids_all):  # a round where every client dropped out leaves the model as it was
                weights = block.num_examples
                train_loss = float(np.dot(weights, block.train_loss) / weights.sum())
                if sums is None:
                    updates = ClientUpdates(ids_all, block.num_examples, block.train_loss, block.global_loss, lr)
                    params = p.aggregator.aggregate(params, block.deltas, updates, round_)
                else:
                    params = self._aggregate_sums(params, block, sums, train_loss, lr, round_)
            utility = self._feedback(round_, timing, ids_all, block)
            acc, loss, stop = p.evaluator.evaluate(round_, params, timing.end_s, summary, recorder.results, t0)
            now = time.perf_counter()
            summary.rounds = round_
            if recorder.results:
                self._record(rounds_tab, clients_tab, round_, timing, ids_all, ranks_all, block, utility,
                             acc, loss, train_loss, now - t0, now - round_t0, up_bytes, lr)
            p.checkpointer.save(round_, recorder.results, recorder.tables, params, summary, t0, stop)
            recorder.step_done(summary.final_accuracy, timing.end_s)
        return finish(p, summary, t0, params, recorder)

    def _feedback(self, round_: int, timing, ids_all: np.ndarray, block: ResultBlock) -> np.ndarray:
        """Give the selector every selected client's status, duration and utility.

        Status ``completed`` (aggregated), ``dropped`` (offline at its finish
        time) or ``straggler``; duration from the round's start to the
        client's completion. Returns the utility measured per selected client
        (NaN where not trained).
        """
        p = self.parts
        utility = np.full(len(timing.client_ids), math.nan)
        utility[np.searchsorted(timing.client_ids, ids_all)] = block.utility
        status = np.where(timing.aggregated, STATUS_COMPLETED,
                          np.where(timing.dropped, STATUS_DROPPED, STATUS_STRAGGLER))
        p.clock.selector.feedback(round_, RoundFeedback(
            timing.client_ids, status, timing.completion_s, utility, p.client_sizes[timing.client_ids]))
        return utility

    def _record(self, rounds_tab, clients_tab, round_, timing, ids_all, ranks_all, block, utility,
                acc, loss, train_loss, wall, round_wall, up_bytes, lr) -> None:
        from hpcbench.fl.output import STATUS_AGGREGATED

        p = self.parts
        m = len(timing.client_ids)
        rank_of = np.full(m, -1, np.int32)
        loss_c = np.full(m, math.nan)
        wall_c = np.zeros(m)
        cpu_c = np.zeros(m)
        pos = np.searchsorted(timing.client_ids, ids_all)
        rank_of[pos] = ranks_all
        loss_c[pos] = block.train_loss
        wall_c[pos] = block.train_wall_s
        cpu_c[pos] = block.train_cpu_s
        up_c = np.zeros(m, np.int64)
        up_c[pos] = up_bytes
        clients_tab.append({
            "round": np.full(m, round_), "client_id": timing.client_ids, "executor_rank": rank_of,
            "status": np.where(timing.aggregated, STATUS_AGGREGATED,
                               np.where(timing.dropped, STATUS_DROPPED, STATUS_STRAGGLER)),
            "compute_s": timing.compute_s, "communication_s": timing.communication_s,
            "completion_s": timing.completion_s, "num_examples": p.client_sizes[timing.client_ids],
            "train_loss": loss_c, "train_wall_s": wall_c, "train_cpu_s": cpu_c, "utility": utility,
            "downlink_bytes": np.full(m, p.clock.down_bytes, np.int64), "uplink_bytes": up_c,
        }, flush=False)
        n_agg = int(timing.aggregated.sum())
        n_drop = int(timing.dropped.sum())
        rounds_tab.append({
            "round": round_, "virtual_time_s": timing.end_s, "round_duration_s": timing.end_s - timing.start_s,
            "wall_time_s": wall, "round_wall_s": round_wall, "test_accuracy": acc, "test_loss": loss,
            "train_loss": train_loss, "online": timing.online, "selected": m, "participants": n_agg,
            "stragglers": m - n_agg - n_drop, "dropouts": n_drop, "learning_rate": lr,
        })

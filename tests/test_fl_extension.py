"""A client-training engine and an FL mode are one file and one registry line each (issue 36).

This file defines a toy engine and a toy round driver and registers each with
one line (``monkeypatch.setitem`` on ``ENGINES`` / ``ROUND_DRIVERS``, undone
after the test): the config accepts their names, the job builds them from
its parts, and they run, without any other file knowing of them.
"""

from __future__ import annotations

import time

import numpy as np
import pytest
from mpi4py import MPI
from pydantic import ValidationError

from hpcbench.fl.config import FLConfig
from hpcbench.fl.engines import ENGINES
from hpcbench.fl.engines.base import ClientTasks
from hpcbench.fl.engines.numpy_engine import NumpyEngine
from hpcbench.fl.executors.block import ResultBlock
from hpcbench.fl.executors.pool import assign_clients
from hpcbench.fl.header import describe
from hpcbench.fl.job import build_rounds, prepare
from hpcbench.fl.rounds import ROUND_DRIVERS, DriverEntry
from hpcbench.fl.rounds.parts import finish, run_executor
from hpcbench.fl.rounds.recorder import RoundRecorder
from hpcbench.fl.rounds.summary import Summary

SHRINK = 0.25


class ShrinkEngine(NumpyEngine):
    """Toy engine: every client's update is ``-SHRINK * lr * start`` (weight decay alone), with its example count."""

    name = "shrink"
    auto_preference = None
    description = "toy: weight decay only"

    @classmethod
    def problems(cls, job) -> list[str]:
        return cls._model_problem(job)     # any mode: it trains a task from whatever model it is given

    def train_run(self, client_ids, streams, start, lr, block) -> None:
        sizes = self.dataset.client_sizes()
        for i, cid in enumerate(client_ids.tolist()):
            block.deltas[i] = (-SHRINK * lr) * start
            block.meta[i] = (sizes[cid], float(cid), 0.0, 0.0, 1.0, np.nan)


class OneClientRounds:
    """Toy FL mode: step ``s`` trains client ``s - 1`` alone and adds its update to the model."""

    step_unit = "steps"

    def __init__(self, parts) -> None:
        self.parts = parts
        self.losses = []

    @staticmethod
    def capacity(settings) -> int:
        return 1

    def run(self, recorder) -> Summary:
        p = self.parts
        if p.pool.rank != 0:
            return run_executor(p)
        summary, t0 = Summary(), time.perf_counter()
        params = p.evaluator.initial_parameters()
        for step in range(1, p.settings.rounds.rounds + 1):
            ids = np.array([step - 1], np.int64)
            plan = {rank: ClientTasks.one_model(mine, step, params)
                    for rank, mine in assign_clients(ids, np.ones(1), p.pool.active(step)).items()}
            block = ResultBlock.collecting(1, p.pool.num_params)
            dest = {rank: block for rank, tasks in plan.items() if len(tasks)}
            if 0 in plan:
                p.engine.train(plan[0], dest[0])
            p.pool.collect(step, plan, dest, p.pool.dispatch(step, plan))
            params = params + block.deltas[0]
            self.losses.append(float(block.train_loss[0]))
            p.evaluator.evaluate(step, params, float(step), summary, None, t0)
            summary.rounds = step
        return finish(p, summary, t0, params, recorder)


@pytest.fixture
def toys(monkeypatch):
    monkeypatch.setitem(ENGINES, "shrink", ShrinkEngine)
    monkeypatch.setitem(ROUND_DRIVERS, "one-client", DriverEntry(f"{__name__}:OneClientRounds"))


def _config(**keys) -> FLConfig:
    return FLConfig.model_validate({"rounds": 3, "eval_interval": 1, "progress": False,
                                    "traces": {"availability": {"format": "none"}}, **keys})


def test_unregistered_names_are_refused():
    for key in ({"client_training": "shrink"}, {"mode": "one-client"}):
        with pytest.raises(ValidationError, match="registered: "):
            _config(**key)


def test_toy_engine_trains_a_synchronous_job(toys):
    cfg = _config(client_training="shrink")
    assert cfg.engine == "shrink" and not cfg.engine_chosen
    assert "client training: shrink (toy: weight decay only)" in describe(cfg, "x.h5", 1, "defaults")
    assert _config().engine == "numpy"          # auto never picks an engine without an auto_preference
    setup = prepare(cfg, MPI.COMM_SELF)
    start = setup.server_engine.initial_parameters(setup.server_model)
    summary = build_rounds(cfg, setup, MPI.COMM_SELF).run(RoundRecorder())
    assert summary.rounds == 3 and summary.clients_trained == 3 * 10
    # FedAvg of identical updates: each round scales the model by (1 - SHRINK * lr)
    np.testing.assert_allclose(summary.final_parameters, start * (1 - SHRINK * cfg.learning_rate) ** 3, rtol=1e-5)
    assert np.isfinite(summary.final_accuracy)


def test_toy_mode_runs_its_own_loop(toys):
    cfg = _config(mode="one-client", client_training="shrink", rounds=4)
    setup = prepare(cfg, MPI.COMM_SELF)
    start = setup.server_engine.initial_parameters(setup.server_model)
    driver = build_rounds(cfg, setup, MPI.COMM_SELF)
    assert isinstance(driver, OneClientRounds)
    summary = driver.run(RoundRecorder())
    assert summary.rounds == 4 and summary.clients_trained == 4
    assert driver.losses == [0.0, 1.0, 2.0, 3.0]   # clients 0..3, one per step, through the engine
    np.testing.assert_allclose(summary.final_parameters, start * (1 - SHRINK * cfg.learning_rate) ** 4, rtol=1e-5)

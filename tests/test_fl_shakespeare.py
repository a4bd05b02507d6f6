"""An end-to-end federated Shakespeare job (char LSTM, one client per speaking role) at -np 2."""

from __future__ import annotations

import math

import numpy as np
import pytest

from hpcbench.results import read_attrs, read_table
from mpitools import run_mpi


@pytest.mark.mpi
def test_shakespeare_job_np2(tmp_path):
    out = tmp_path / "shakespeare.h5"
    proc = run_mpi(2, ["-m", "hpcbench.fl", "jobs/configs/shakespeare.yaml", "--rounds", "4", "--eval_interval",
                       "2", "--participants", "6", "--progress", "false", "--output", str(out)], timeout=400)
    assert proc.returncode == 0, proc.stderr[-3000:]
    attrs = read_attrs(out)
    assert attrs["status"] == "completed" and attrs["world_size"] == 2 and attrs["rounds_completed"] == 4
    assert attrs["config"]["dataset"]["name"] == "shakespeare"
    assert attrs["registered_clients"] > 100  # one client per speaking role
    rounds = read_table(out, "rounds")
    acc = rounds["test_accuracy"][~np.isnan(rounds["test_accuracy"])]
    assert len(acc) == 2 and all(0.0 < a < 1.0 for a in acc)
    assert np.all(np.diff(rounds["virtual_time_s"]) > 0)
    clients = read_table(out, "clients")
    aggregated = clients["status"] == "aggregated"
    assert (rounds["participants"] == 6).all() and aggregated.sum() == 24
    assert np.all(np.isfinite(clients["train_loss"][aggregated]))
    assert set(clients["executor_rank"][aggregated].tolist()) <= {0, 1}
    assert math.isfinite(attrs["final_test_accuracy"])

"""``client_updates: summed``: executors send the weighted sum of their clients' updates.

The sums (:mod:`hpcbench.fl.executors.sums`) against a hand computation; the
settings it refuses; whole jobs at 1-4 ranks against ``rows`` mode, which
must agree within float rounding (not bit for bit: the additions are grouped
per executor), with the same per-client metadata.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from hpcbench.fl.config import load_config
from hpcbench.fl.engines.base import ClientTasks
from hpcbench.fl.executors.block import ResultBlock
from hpcbench.fl.executors.sums import GROUP_BYTES, group_rows, train_summed
from hpcbench.fl.limits import round_updates_error
from hpcbench.results import read_attrs, read_table
from hpcbench.runtime.config import ConfigError
from mpitools import run_mpi

CONFIG = "jobs/configs/digits.yaml"


class _FakeEngine:
    """Writes a known update and metadata row per client; records the group sizes it was given."""

    def __init__(self, num_params: int) -> None:
        self.num_params = num_params
        self.groups: list[int] = []

    def train(self, tasks: ClientTasks, block: ResultBlock) -> None:
        self.groups.append(len(tasks))
        for i, cid in enumerate(tasks.client_ids.tolist()):
            rng = np.random.default_rng(cid)
            block.deltas[i] = (rng.standard_normal(self.num_params) * 10.0 ** rng.integers(-4, 4)).astype(np.float32)
            block.meta[i] = (cid % 7 + 1, cid * 0.5, 0.1, 0.1, cid * 2.0, math.nan)


def _expected(ids, num_params, weighting):
    total = np.zeros(num_params)
    for cid in ids:
        rng = np.random.default_rng(cid)
        delta = (rng.standard_normal(num_params) * 10.0 ** rng.integers(-4, 4)).astype(np.float32)
        total += (cid % 7 + 1 if weighting == "examples" else 1.0) * delta.astype(np.float64)
    return total


@pytest.mark.parametrize("group", [1, 2, 5, 9])
@pytest.mark.parametrize("weighting", ["examples", "uniform"])
def test_train_summed_adds_every_client_weighted_in_task_order(group, weighting):
    ids = np.array([3, 8, 11, 20, 21], np.int64)
    p = 70_001  # more than one column block of the sums
    engine = _FakeEngine(p)
    tasks = ClientTasks.one_model(ids, 1, np.zeros(p, np.float32))
    meta = np.full((5, 6), -1.0)
    total = np.full(p, 99.0)  # overwritten, not added to
    train_summed(engine, tasks, meta, total, weighting, ResultBlock.empty(group, p))
    assert engine.groups == [min(group, 5 - lo) for lo in range(0, 5, group)]
    assert total.tobytes() == _expected(ids, p, weighting).tobytes()  # the same additions in the same order
    assert meta[:, 0].tolist() == [c % 7 + 1 for c in ids.tolist()]
    assert meta[:, 4].tolist() == [c * 2.0 for c in ids.tolist()]


def test_train_summed_rejects_bad_arguments():
    tasks = ClientTasks.one_model(np.arange(3), 1, np.zeros(4, np.float32))
    with pytest.raises(ValueError, match="weighting"):
        train_summed(_FakeEngine(4), tasks, np.empty((3, 6)), np.empty(4), "median", ResultBlock.empty(1, 4))
    with pytest.raises(ValueError, match="meta has 2 rows for 3 tasks"):
        train_summed(_FakeEngine(4), tasks, np.empty((2, 6)), np.empty(4), "examples", ResultBlock.empty(1, 4))


def test_group_rows_holds_at_most_group_bytes_of_updates():
    assert group_rows(6_497_162, 50) == GROUP_BYTES // (4 * 6_497_162)
    assert group_rows(100, 7) == 7
    assert group_rows(10**9, 7) == 1


@pytest.mark.parametrize("overrides, phrase", [
    ({"mode": "async"}, "needs mode 'sync'"),
    ({"aggregator.name": "qfedavg"}, "aggregator 'qfedavg' needs per-client updates"),
    ({"uplink_compression.name": "topk", "uplink_compression.ratio": "0.1"}, "uplink_compression 'topk'"),
])
def test_summed_refuses_what_needs_each_clients_update(overrides, phrase):
    with pytest.raises(ConfigError, match="client_updates") as err:
        load_config(None, {"client_updates": "summed", **overrides})
    assert phrase in str(err.value)


def test_summed_needs_one_sum_per_executor_not_every_update():
    """1,300 CNN participants need 33.8 GB of updates in ``rows`` mode; summed needs 2 sums."""
    rows = load_config(CONFIG, {"participants": "1300", "overcommitment": "1.0", "dataset.num_clients": "2000"})
    summed = rows.model_copy(update={"client_updates": "summed"})
    assert "33.8 GB" in round_updates_error(rows, 6_497_162, available=20 * 10**9, world_size=3)
    assert round_updates_error(summed, 6_497_162, available=20 * 10**9, world_size=3) is None
    msg = round_updates_error(summed, 6_497_162, available=10**8, world_size=65)
    assert "client_updates=summed" in msg and "64 executors" in msg


_JOB = ["-m", "hpcbench.fl", CONFIG, "--rounds", "4", "--participants", "12", "--eval_interval", "2",
        "--progress", "false"]


def _run(n, tmp_path, updates, engine):
    out = tmp_path / f"{updates}-{engine}-np{n}.h5"
    proc = run_mpi(n, [*_JOB, "--client_updates", updates, "--client_training", engine, "--output", str(out)],
                   timeout=300)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    return out


def _final(path):
    import h5py

    with h5py.File(path) as f:
        return f["model/final_parameters"][()]


@pytest.mark.mpi
@pytest.mark.parametrize("engine", ["numpy", "sequential"])
@pytest.mark.parametrize("n", [1, 3])
def test_summed_job_agrees_with_rows_within_rounding(n, engine, tmp_path):
    rows, summed = _run(n, tmp_path, "rows", engine), _run(n, tmp_path, "summed", engine)
    a, b = read_table(rows, "clients"), read_table(summed, "clients")
    for column in ("client_id", "num_examples", "uplink_bytes"):
        np.testing.assert_array_equal(b[column], a[column], err_msg=column)  # the same clients each round ...
    assert list(b["status"]) == list(a["status"])
    for column in ("train_loss", "utility"):  # ... trained alike (the models differ in float rounding)
        np.testing.assert_allclose(b[column], a[column], rtol=1e-4, err_msg=column)
    ra, rb = read_table(rows, "rounds"), read_table(summed, "rounds")
    np.testing.assert_allclose(rb["test_accuracy"], ra["test_accuracy"], atol=0.02)
    np.testing.assert_allclose(rb["test_loss"], ra["test_loss"], rtol=1e-3)
    np.testing.assert_allclose(_final(summed), _final(rows), rtol=1e-4, atol=1e-6)
    assert read_attrs(summed)["status"] == "completed"


def test_header_says_the_updates_are_summed():
    from hpcbench.fl.header import describe

    assert "client updates summed on each executor" in describe(
        load_config(None, {"client_updates": "summed"}), "out.h5", 3, "defaults")
    assert "summed" not in describe(load_config(None, {}), "out.h5", 3, "defaults")


@pytest.mark.mpi
def test_summed_job_at_one_and_four_ranks_agree(tmp_path):
    one, four = _run(1, tmp_path, "summed", "numpy"), _run(4, tmp_path, "summed", "numpy")
    np.testing.assert_allclose(read_table(four, "rounds")["test_loss"], read_table(one, "rounds")["test_loss"],
                               rtol=1e-4)
    np.testing.assert_allclose(read_table(four, "clients")["train_loss"], read_table(one, "clients")["train_loss"],
                               rtol=1e-5)

"""``client_training: batched`` (hpcbench.fl.engines.batched_training) trains as the sequential path does."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from pydantic import ValidationError

from hpcbench.fl.aggregation import AGGREGATORS
from hpcbench.fl.engines.batched_training import train_clients_batched
from hpcbench.fl.config import DatasetConfig, FLConfig, ModelConfig
from hpcbench.fl.data import DigitsDataset
from hpcbench.fl.models import build_model, flat_parameters
from hpcbench.fl.engines.training import client_generator, train_client
from hpcbench.results import read_attrs, read_table
from mpitools import run_mpi


@pytest.fixture(scope="module")
def task():
    torch.set_num_threads(1)
    ds = DigitsDataset(DatasetConfig(num_clients=40, alpha=0.3, samples_per_client=None), seed=3)  # disjoint: 1..~100
    model = build_model(ModelConfig(name="mlp", hidden=32), ds, 3)
    return ds, model, flat_parameters(model)


@pytest.mark.parametrize("momentum,aggregator", [(0.0, "fedavg"), (0.9, "fedavg"), (0.0, "fedprox"),
                                                 (0.0, "qfedavg")])
def test_batched_matches_sequential_per_client(task, momentum, aggregator):
    ds, model, start = task
    agg = AGGREGATORS[aggregator](AGGREGATORS[aggregator].Config())
    ids = list(range(ds.num_clients))
    sizes = ds.client_sizes()
    assert sizes.min() < 8 < sizes.max()  # several mini-batch-size groups, and clients that reshuffle
    kw = dict(local_steps=7, batch_size=8, learning_rate=0.05, momentum=momentum)
    seq = [train_client(model, start, ds.shard(c), generator=client_generator(1, 2, c),
                        regulariser=agg.client_regulariser(), global_loss=agg.needs_global_loss, **kw) for c in ids]
    bat = train_clients_batched(model, start, [ds.shard(c) for c in ids], generators=[client_generator(1, 2, c)
                                                                                     for c in ids],
                                regulariser=agg.client_regulariser(), global_loss=agg.needs_global_loss, **kw)
    for a, b in zip(seq, bat):
        assert b.num_examples == a.num_examples
        np.testing.assert_allclose(b.delta, a.delta, rtol=1e-4, atol=1e-6)
        assert b.train_loss == pytest.approx(a.train_loss, rel=1e-5)
        assert b.utility == pytest.approx(a.utility, rel=1e-5)
        assert (np.isnan(b.global_loss) and np.isnan(a.global_loss)) or b.global_loss == a.global_loss
    # the batched path changed the clients: a wrong (e.g. untrained) update would not match
    assert max(np.abs(a.delta).max() for a in seq) > 1e-2


@pytest.mark.parametrize("bad", [{"mode": "async"},
                                 {"dataset": {"name": "shakespeare", "partition": "natural"},
                                  "model": {"name": "charlstm"}},
                                 {"client_training": "vmap"}])
def test_batched_refused_where_unsupported(bad):
    with pytest.raises(ValidationError, match="client_training"):
        FLConfig.model_validate({"client_training": "batched", **bad})


@pytest.mark.mpi
def test_batched_job_trains_equivalently(tmp_path):
    args = ["-m", "hpcbench.fl", "jobs/configs/digits.yaml", "--rounds", "40", "--eval_interval", "10",
            "--progress", "false"]
    acc = {}
    for mode in ("sequential", "batched"):
        out = tmp_path / f"{mode}.h5"
        proc = run_mpi(2, [*args, "--client_training", mode, "--output", str(out)], timeout=240)
        assert proc.returncode == 0, proc.stderr[-3000:]
        assert read_attrs(out)["config"]["client_training"] == mode
        rounds = read_table(out, "rounds")
        acc[mode] = rounds["test_accuracy"][np.isfinite(rounds["test_accuracy"])]
    assert len(acc["batched"]) == 4
    np.testing.assert_allclose(acc["batched"], acc["sequential"], atol=0.02)
    assert acc["batched"][-1] > 0.8

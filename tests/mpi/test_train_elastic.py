"""The elastic worker set through whole training jobs in this MPI job (any world size 1..4).

Every rank started is in the warm pool; a schedule grows and shrinks the
active prefix. After each resize the active ranks train in lockstep with
one model; plain SGD on gradient averages over equal per-worker batches
gives, within rounding, the model of a run that never resized.
"""

from __future__ import annotations

import hashlib

import numpy as np
import pytest
import torch

from hpcbench.lifecycle import run
from hpcbench.results import read_table
from hpcbench.train.job import TrainJob

#: 12 samples per step: an equal split over 1, 2, 3 or 4 workers
BASE = ["--model", "digits_mlp", "--warmup", "0", "--iterations", "2", "--batches_per_iter", "4", "--lr", "0.1",
        "--bucket_mb", "0.002", "--progress", "false", "--profile_steps", "1", "--sync", "[ring]"]


def _output(comm, tmp_path_factory, name):
    return comm.bcast(str(tmp_path_factory.mktemp("el") / name) if comm.rank == 0 else None, root=0)


def _params(model) -> np.ndarray:
    return torch.nn.utils.parameters_to_vector(model.parameters()).detach().numpy().copy()


def _digest(model) -> str:
    return hashlib.sha256(_params(model).tobytes()).hexdigest()


def _train(comm, tmp_path_factory, name, elastic: str, batch: int):
    out = _output(comm, tmp_path_factory, name)
    assert run(TrainJob, [*BASE, "--batch_size", str(batch), "--elastic", elastic, "--output", out], comm=comm) == 0
    return out


def test_grow_and_shrink_keep_the_active_ranks_in_lockstep_with_one_model(comm, workers, tmp_path_factory):
    """Schedule 1 -> p -> 1 -> p (steps 0, 2, 4, 6 of 8): every rank active at the end holds rank 0's model
    bit for bit; the resizes table has each resize with its phases; steps record the worker counts."""
    p = comm.size
    if p < 2:
        pytest.skip("a grow needs at least 2 ranks (the warm pool is the ranks mpiexec started)")
    torch.set_num_threads(1)
    out = _train(comm, tmp_path_factory, "g.h5", f"{{schedule: '0:1, 2:{p}, 4:1, 6:{p}'}}", 12)
    final = workers[-1]
    assert final.model is not None
    assert len({d for d in comm.allgather(_digest(final.model))}) == 1      # every rank: active at the end
    comm.Barrier()
    if comm.rank:
        return
    steps = read_table(out, "steps")
    assert list(steps["workers"]) == [1, 1, p, p, 1, 1, p, p] and set(steps["global_batch"]) == {12}
    rs = read_table(out, "resizes")
    assert list(rs["step"]) == [2, 4, 6] and list(rs["old"]) == [1, p, 1] and list(rs["new"]) == [p, 1, p]
    assert list(rs["kind"].astype(str)) == ["grow", "shrink", "grow"]
    assert set(rs["mode"].astype(str)) == {"warm_pool"}
    assert np.all(rs["bytes_moved"][[0, 2]] > 0) and rs["bytes_moved"][1] == 0
    assert np.all(rs["resize_ms"] > 0) and np.all(np.isfinite(rs["first_step_ms"]))
    d = read_table(out, "decisions")
    assert list(d["workers"]) == [p, 1, p] and list(d["step"]) == [2, 4, 6]


def test_a_resized_run_trains_the_model_of_a_run_that_never_resized(comm, workers, tmp_path_factory):
    """Plain SGD on the average of equal per-worker batches (12 samples per step split evenly, keep_global):
    the averaged gradient is the gradient of the mean loss over the global batch at any worker count, so a run
    that goes 1 -> p -> 1 ends, within float rounding, where a run on one worker does."""
    p = comm.size
    if p < 2:
        pytest.skip("a resize needs at least 2 ranks")
    torch.set_num_threads(1)
    _train(comm, tmp_path_factory, "a.h5", f"{{schedule: '0:1, 3:{p}, 6:1'}}", 12)
    resized = _params(workers[-1].model) if comm.rank == 0 else None
    del workers[:]
    _train(comm, tmp_path_factory, "b.h5", "{workers: 1}", 12)
    if comm.rank == 0:
        never = _params(workers[-1].model)
        np.testing.assert_allclose(resized, never, rtol=1e-5, atol=1e-6)


def test_keep_local_scales_the_global_batch(comm, workers, tmp_path_factory):
    """``batch: keep_local``: each worker keeps its batch, so the global batch follows the worker count."""
    p = comm.size
    if p < 2:
        pytest.skip("a resize needs at least 2 ranks")
    out = _train(comm, tmp_path_factory, "l.h5", f"{{schedule: '0:1, 4:{p}', batch: keep_local}}", 3)
    if comm.rank == 0:
        steps = read_table(out, "steps")
        assert list(steps["global_batch"]) == [3] * 4 + [3 * p] * 4

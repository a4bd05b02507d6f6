"""The modelled step clock (``step_clock: {kind: modelled}``) in whole training jobs (any world size 1..4): each
step's modelled time is the compute profile at its batch plus the allreduce price, worked out here by hand."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import torch

from hpcbench.collectives.linkcost import predict_allreduce_links
from hpcbench.lifecycle import run
from hpcbench.results import read_attrs, read_table
from hpcbench.train.job import TrainJob

ALPHA, RATE = 1e-4, 1e8         # 100 us, 100 Mbit/s: 8e-8 s per byte
BASE = ["--model", "digits_mlp", "--warmup", "1", "--iterations", "2", "--batches_per_iter", "3", "--lr", "0.1",
        "--bucket_mb", "0.0001", "--progress", "false", "--profile_steps", "1", "--overlap", "false",
        "--sync", "[ring]", "--batch_size", "2", "--step_clock.kind", "modelled",
        "--step_clock.profile_batches", "[2, 4]", "--step_clock.latency_s", f"{ALPHA}",
        "--step_clock.bandwidth", "100Mbit",
        "--policies", "[{name: batch_schedule, batch_size: {0: 2, 3: 3, 5: 8}}]"]


def test_modelled_step_is_profile_plus_allreduce_price(comm, tmp_path_factory):
    """Batch 2 (measured), 3 (halfway between 2 and 4: the mean of their times) and 8 (twice 4's forward and
    backward, its optimizer) per worker; overlap off, so each step is the compute plus the buckets' ring prices
    one after the other (:func:`predict_allreduce_links` on p equal links; 0 at one rank). The wall clock stays
    in step_s, the clock is named in the attributes, and the figure's reading of the file sums the modelled
    times."""
    torch.set_num_threads(1)
    out = comm.bcast(str(tmp_path_factory.mktemp("clock") / "c.h5") if comm.rank == 0 else None, root=0)
    assert run(TrainJob, [*BASE, "--output", out], comm=comm) == 0
    if comm.rank:
        return
    p = comm.size
    steps, prof, buckets = read_table(out, "steps"), read_table(out, "clock_profile"), read_table(out, "buckets")
    assert read_attrs(out)["step_clock"] == "modelled" and list(prof["batch"]) == [2, 4]
    assert len(buckets["bytes"]) > 1        # several buckets priced
    comm_s = sum(predict_allreduce_links("ring", int(m), ALPHA, [8 / RATE] * p) for m in buckets["bytes"])
    f, b, o = prof["forward_s"], prof["backward_s"], prof["optimizer_s"]
    by_batch = {2: f[0] + b[0] + o[0], 3: (f[0] + f[1]) / 2 + (b[0] + b[1]) / 2 + (o[0] + o[1]) / 2,
                8: 2 * (f[1] + b[1]) + o[1]}
    batch = (steps["global_batch"] // p).tolist()
    assert batch == [2, 2, 2, 3, 3, 8, 8], batch       # warm-up step 0, then 6 measured
    want = np.array([by_batch[k] + comm_s for k in batch])
    np.testing.assert_allclose(steps["modelled_step_s"], want, rtol=1e-12)
    assert np.all(steps["step_s"] > 0) and not np.allclose(steps["step_s"], steps["modelled_step_s"])
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "analysis"))
    import plot_train_adaptive

    (c,) = plot_train_adaptive.curves(out, plot_train_adaptive.clock_of(read_attrs(out)))
    np.testing.assert_allclose(c["time"][-1], want[1:].sum(), rtol=1e-12)


def test_bad_clock_exits_2_naming_key_and_value(comm, tmp_path_factory, capsys):
    """A clock kind, bandwidth or profile batch that is not one, and a modelled clock on emulated compute: exit 2
    with the key and the value, no file."""
    out = comm.bcast(str(tmp_path_factory.mktemp("badclock") / "bad.h5") if comm.rank == 0 else None, root=0)
    for args, needle in [(["--step_clock.kind", "wallish"], "wallish"),
                         (["--step_clock.bandwidth", "fast"], "fast"),
                         (["--step_clock.profile_batches", "[0]"], "step_clock.profile_batches"),
                         (["--compute", "emulated"], "step_clock.kind: 'modelled' needs compute: real")]:
        capsys.readouterr()
        code = run(TrainJob, [*BASE, *args, "--output", out], comm=comm)
        err = capsys.readouterr().err
        assert code == 2, args
        if comm.rank == 0:
            assert needle in err and "step_clock" in err, err
    assert not Path(out).exists()

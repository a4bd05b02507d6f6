"""The runner-monitor contract, through a whole training job run in this MPI job (any world size).

A probe monitor, registered for the test only, checks what the runner hands
it (local gradients, their squared norm, batch sizes) and reports numbers the
test can predict; with ``interleave_monitors`` the iterations alternate
between no monitor and the probe (figure 8's measurement).
"""

from __future__ import annotations

import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from hpcbench import monitors
from hpcbench.lifecycle import run
from hpcbench.monitors import Monitor
from hpcbench.results import read_attrs, read_table
from hpcbench.train.job import TrainJob


class Probe(Monitor):
    """Squared norms of the local and the synchronised gradient; checks the view on the way."""

    name = "probe"
    needs_local_grads = True
    outputs = ("local_sq", "global_sq", "workers")

    def observe(self, view):
        local = sum(float(g.double().pow(2).sum()) for g in view.local_grads)
        assert math.isclose(local, view.local_sq_norm, rel_tol=1e-5), (local, view.local_sq_norm)
        assert view.global_batch == view.local_batch * view.comm.size
        glob = sum(float(g.double().pow(2).sum()) for g in view.global_grads)
        return {"local_sq": view.comm.allreduce(view.local_sq_norm) / view.comm.size, "global_sq": glob,
                "workers": view.comm.size}


@pytest.fixture
def probe(monkeypatch):
    monkeypatch.setitem(monitors.MONITORS, "probe", Probe)


def test_interleaved_monitor_runs_alternate_and_are_recorded(comm, probe, tmp_path_factory):
    torch.set_num_threads(1)
    out = comm.bcast(str(tmp_path_factory.mktemp("mon") / "m.h5") if comm.rank == 0 else None, root=0)
    status = run(TrainJob, ["--model", "digits_mlp", "--batch_size", "8", "--warmup", "1", "--iterations", "2",
                            "--batches_per_iter", "2", "--sync", "[ring]", "--monitors", "[probe]",
                            "--interleave_monitors", "true", "--bucket_mb", "0.002", "--lr", "0.1",
                            "--progress", "false", "--output", out], comm=comm)
    assert status == 0
    comm.Barrier()
    if comm.rank:
        return
    steps = read_table(out, "steps")
    measured = ~steps["warmup"]
    variant = steps["variant"][measured].astype(str)
    assert list(variant) == ["none"] * 2 + ["probe"] * 2 + ["none"] * 2 + ["probe"] * 2
    lsq, gsq = steps["probe_local_sq"][measured], steps["probe_global_sq"][measured]
    assert np.all(np.isnan(lsq[variant == "none"])) and np.all(np.isfinite(lsq[variant == "probe"]))
    assert np.all(steps["probe_workers"][measured][variant == "probe"] == comm.size)
    # the mean of worker gradients is never longer than their mean length (Jensen); equal at one worker
    ok = gsq[variant == "probe"] <= lsq[variant == "probe"] * (1 + 1e-6)
    assert np.all(ok)
    if comm.size == 1:
        np.testing.assert_allclose(gsq[variant == "probe"], lsq[variant == "probe"], rtol=1e-5)
    summary = read_table(out, "summary")
    assert list(summary["variant"].astype(str)) == ["none", "probe"]
    assert np.isnan(summary["monitor_overhead"][0]) and np.isfinite(summary["monitor_overhead"][1])
    # the monitor's own time, timed directly: its steps' monitor_s less none's, over none's step
    assert np.isnan(summary["monitor_cost"][0]) and np.all(summary["monitor_s"] >= 0)
    m = steps["monitor_s"][measured]
    assert summary["monitor_s"][1] == pytest.approx(m[variant == "probe"].mean())
    want = (m[variant == "probe"].mean() - m[variant == "none"].mean()) / steps["step_s"][measured][variant == "none"].mean()
    assert summary["monitor_cost"][1] == pytest.approx(want)
    png = out.replace(".h5", ".png")
    fig = subprocess.run([sys.executable, "analysis/plot_train_monitors.py", out, "-o", png], capture_output=True,
                         text=True, cwd=str(Path(__file__).resolve().parents[2]), timeout=120)
    assert fig.returncode == 0, fig.stderr
    assert "timed" in fig.stdout and Path(png).read_bytes()[:4] == b"\x89PNG"
    assert read_attrs(out)["status"] == "completed"

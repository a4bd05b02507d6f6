"""Monitors on real communicators (any world size): known noise scale, numpy variance, agreement."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from monitor_data import B_SIMPLE, LOCAL_BATCH, true_gradient, worker_gradients
from hpcbench.monitors import GradientView, build_monitor


def _agree(comm, out: dict) -> None:
    """Every rank returned exactly rank 0's values."""
    mine = [out[k] for k in sorted(out)]
    first = comm.bcast(mine, root=0)
    assert all((a == b) or (math.isnan(a) and math.isnan(b)) for a, b in zip(mine, first)), (mine, first)


@pytest.mark.parametrize("estimator", ["local", "mean"])
def test_gns_recovers_b_simple(comm, estimator):
    n, r = comm.size, comm.rank
    mon = build_monitor("gns", alpha=0.1, estimator=estimator)
    g = true_gradient()
    rng = np.random.default_rng(7)          # same stream on every rank: all workers' gradients
    for step in range(25):
        w = worker_gradients(rng, g, n)
        mean = torch.from_numpy(w.mean(axis=0).astype(np.float32))
        view = GradientView(step=step, local_sq_norm=float(w[r] @ w[r]), local_grads=None,
                            global_grads=[mean], local_batch=LOCAL_BATCH,
                            global_batch=LOCAL_BATCH * n, comm=comm)
        out = mon.observe(view)
        _agree(comm, out)
    if n == 1:
        assert all(math.isnan(v) for v in out.values())
    else:
        assert out["gns_b_simple"] == pytest.approx(B_SIMPLE, rel=0.10)
        assert out["gns_g_sq_ema"] > 0 and out["gns_trace_ema"] > 0


def test_variance_matches_numpy(comm):
    n, r = comm.size, comm.rank
    shapes = [(17, 9), (33,), (4, 3, 5), (1,)]
    rng = np.random.default_rng(11)
    grads = [[rng.standard_normal(s).astype(np.float32) * (1 + i) for i, s in enumerate(shapes)]
             for _ in range(n)]
    ref = sum(np.linalg.norm((np.stack(ts).astype(np.float64) ** 2).mean(0)
                             - np.stack(ts).astype(np.float64).mean(0) ** 2)
              for ts in zip(*grads))
    mean = [torch.from_numpy(np.stack(ts).astype(np.float64).mean(0).astype(np.float32))
            for ts in zip(*grads)]
    local = [torch.from_numpy(t) for t in grads[r]]
    for algorithm in ("auto", "ring", "tree"):
        mon = build_monitor("variance", algorithm=algorithm)
        view = GradientView(step=0, local_sq_norm=0.0, local_grads=local, global_grads=mean,
                            local_batch=4, global_batch=4 * n, comm=comm)
        out = mon.observe(view)
        _agree(comm, out)
        assert out["grad_variance"] == pytest.approx(ref, rel=1e-5, abs=1e-5)
        assert [t.numpy().tolist() for t in local] == [t.tolist() for t in grads[r]]  # untouched


def test_trace_variance_matches_numpy(comm):
    """estimator: trace is the sum of the elementwise variances over workers (numpy in float64), from each
    rank's squared norm and the mean gradient, the same on every rank; no local gradients needed."""
    n, r = comm.size, comm.rank
    shapes = [(17, 9), (33,), (4, 3, 5), (1,)]
    rng = np.random.default_rng(13)
    grads = [[(rng.standard_normal(s) * (1 + i) + 0.5).astype(np.float32) for i, s in enumerate(shapes)]
             for _ in range(n)]
    flat = np.stack([np.concatenate([t.ravel() for t in g]).astype(np.float64) for g in grads])  # (n, D)
    ref = float(((flat ** 2).mean(0) - flat.mean(0) ** 2).sum())
    by_hand = float((flat ** 2).sum(1).mean() - flat.mean(0) @ flat.mean(0))
    assert ref == pytest.approx(by_hand, rel=1e-9, abs=1e-9)
    mean = [torch.from_numpy(np.stack(ts).astype(np.float64).mean(0).astype(np.float32)) for ts in zip(*grads)]
    mon = build_monitor("variance", estimator="trace")
    assert mon.label == "variance_trace" and not mon.needs_local_grads
    view = GradientView(step=0, local_sq_norm=float(flat[r] @ flat[r]), local_grads=None, global_grads=mean,
                        local_batch=4, global_batch=4 * n, comm=comm)
    out = mon.observe(view)
    _agree(comm, out)
    scale = float(flat.mean(0) @ flat.mean(0))      # float32 mean gradient: error about 1e-7 of |g_bar|^2
    assert out["grad_variance"] == pytest.approx(ref, abs=1e-5 * scale)
    if n > 1:
        assert out["grad_variance"] > 0.5 * ref > 0

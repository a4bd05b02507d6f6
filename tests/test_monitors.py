"""Monitors (hpcbench.monitors): registry, options, estimators against known values."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from mpi4py import MPI

from monitor_data import B_SIMPLE, LOCAL_BATCH, true_gradient, worker_gradients
from hpcbench.monitors import MONITORS, GradientView, build_monitor, monitor_options
from hpcbench.monitors.gns import _EMA, noise_scale_terms
from hpcbench.monitors.variance import gradient_variance, trace_variance


def test_registry_builds_every_monitor():
    assert set(MONITORS) == {"gns", "variance"}
    for name, cls in MONITORS.items():
        m = build_monitor(name, interval=3)
        assert isinstance(m, cls) and m.name == name and m.outputs
        assert [m.due(s) for s in range(4)] == [True, False, False, True]
    assert MONITORS["variance"].needs_local_grads and not MONITORS["gns"].needs_local_grads
    assert monitor_options("gns") == ("interval", "alpha", "estimator")


@pytest.mark.parametrize("name, options, word", [
    ("gns", {"alpha": 0.0}, "alpha"), ("gns", {"alpha": 1.5}, "alpha"),
    ("gns", {"alpha": "x"}, "alpha"), ("gns", {"estimator": "median"}, "estimator"),
    ("gns", {"beta": 1}, "beta"), ("variance", {"algorithm": "recursive_doubling"}, "algorithm"),
    ("variance", {"algorithm": "nope"}, "algorithm"), ("variance", {"interval": 0}, "interval"),
    ("variance", {"estimator": "diagonal"}, "estimator"),
])
def test_bad_options_name_the_option(name, options, word):
    with pytest.raises(ValueError, match=word):
        build_monitor(name, **options)


def test_unknown_monitor_lists_registered():
    with pytest.raises(KeyError, match="gns"):
        build_monitor("hessian")


def test_terms_reject_equal_batches():
    with pytest.raises(ValueError, match="B_small"):
        noise_scale_terms(1.0, 8, 1.0, 8)


@pytest.mark.parametrize("nworkers", [2, 4])
@pytest.mark.parametrize("estimator", ["local", "mean"])
def test_noise_scale_recovers_b_simple(nworkers, estimator):
    """Simulated workers: the EMA ratio lands within 10% of the known B_simple."""
    rng = np.random.default_rng(1)
    g = true_gradient()
    g_ema, s_ema = _EMA(0.1), _EMA(0.1)
    b_small, b_big = LOCAL_BATCH, LOCAL_BATCH * nworkers
    for _ in range(25):
        w = worker_gradients(rng, g, nworkers)
        sq = (w * w).sum(axis=1)
        g_small = sq.mean() if estimator == "mean" else sq[0]
        big = w.mean(axis=0)
        g_sq, trace = noise_scale_terms(g_small, b_small, float(big @ big), b_big)
        ratio = s_ema.update(trace) / g_ema.update(g_sq)
    assert ratio == pytest.approx(B_SIMPLE, rel=0.10)


def test_ema_is_kungfus():
    e = _EMA(0.9)
    assert e.update(10.0) == 10.0          # seeded with the first value
    assert e.update(0.0) == pytest.approx(1.0)   # 0.9 * new + 0.1 * old


def test_single_step_estimates_go_negative_when_noise_dominates():
    """Tiny batches: single-step |G|^2 estimates of either sign, the averaged ones positive."""
    rng = np.random.default_rng(2)
    g = true_gradient()[:2000]
    g /= np.linalg.norm(g)
    signs, g_ema = set(), _EMA(0.05)
    for _ in range(200):    # B_simple = 4000 samples, batches of 1 and 2
        w = g[None, :] + rng.standard_normal((2, g.size)) * np.sqrt(4000.0 / g.size)
        big = w.mean(axis=0)
        g_sq, _ = noise_scale_terms(float(w[0] @ w[0]), 1, float(big @ big), 2)
        signs.add(g_sq > 0)
        g_ema.update(g_sq)
    assert signs == {True, False}
    assert g_ema.value > 0


def test_variance_formula_against_numpy():
    rng = np.random.default_rng(3)
    shapes = [(7, 5), (11,), (3, 2, 4)]
    per_worker = [[rng.standard_normal(s) for s in shapes] for _ in range(3)]
    ref = sum(np.linalg.norm((np.stack(ts) ** 2).mean(0) - np.stack(ts).mean(0) ** 2)
              for ts in zip(*per_worker))
    mean_sq = [torch.from_numpy((np.stack(ts) ** 2).mean(0)) for ts in zip(*per_worker)]
    mean = [torch.from_numpy(np.stack(ts).mean(0)) for ts in zip(*per_worker)]
    assert gradient_variance(mean_sq, mean) == pytest.approx(ref, rel=1e-12)


def test_trace_is_the_sum_of_the_elementwise_variances():
    """Worked by hand: workers' gradients (1, 2) and (3, 6): mean (2, 4), variances (1, 4), trace 5;
    (1/n) sum |g_i|^2 = (5 + 45) / 2 = 25, |g_bar|^2 = 20."""
    assert trace_variance(25.0, 20.0) == 5.0
    w = np.array([[1.0, 2.0], [3.0, 6.0]])
    assert ((w ** 2).mean(0) - w.mean(0) ** 2).sum() == 5.0


def _view(comm, grads, local=True):
    ts = [torch.tensor(x, dtype=torch.float32) for x in grads]
    sq = float(sum((t.double() ** 2).sum() for t in ts))
    return GradientView(step=0, local_sq_norm=sq, local_grads=ts if local else None,
                        global_grads=ts, local_batch=8, global_batch=8 * comm.size, comm=comm)


def test_world_size_one():
    comm = MPI.COMM_SELF
    view = _view(comm, [np.ones((3, 3)), np.arange(4.0)])
    out = build_monitor("gns").observe(view)
    assert set(out) == set(MONITORS["gns"].outputs) and all(math.isnan(v) for v in out.values())
    assert build_monitor("variance").observe(view) == {"grad_variance": 0.0}
    trace = build_monitor("variance", estimator="trace").observe(_view(comm, [np.ones((3, 3)), np.arange(4.0)],
                                                                       local=False))
    assert trace["grad_variance"] == pytest.approx(0.0, abs=1e-6 * 23.0)    # 0 up to the norms' rounding (|g|^2 23)
    with pytest.raises(ValueError, match="local_grads"):
        build_monitor("variance").observe(_view(comm, [np.ones(3)], local=False))


@pytest.mark.parametrize("dtype, rel", [(torch.float32, 1e-6), (torch.float64, 1e-6), (torch.bfloat16, 1e-4)])
def test_sq_norm_matches_the_float64_sum_across_chunks_and_tensors(dtype, rel):
    """float32/float64 on the CPU: BLAS dots per chunk; other dtypes: float32 norms per chunk (the GPU's path)."""
    from hpcbench.monitors.norms import CHUNK, DEVICE_CHUNK, sq_norm, sq_norm_deferred

    g = torch.Generator().manual_seed(3)
    assert DEVICE_CHUNK % CHUNK == 0       # 2 DEVICE_CHUNK + 17 elements cross both paths' chunk boundaries
    ts = [100.0 * torch.randn(2 * DEVICE_CHUNK + 17, generator=g).to(dtype), torch.randn(3, 5, generator=g).to(dtype),
          torch.empty(0, dtype=dtype)]
    want = sum(float((t.double() ** 2).sum()) for t in ts)
    assert sq_norm(ts) == pytest.approx(want, rel=rel)
    assert sq_norm(ts[0]) == pytest.approx(float((ts[0].double() ** 2).sum()), rel=rel)
    assert isinstance(sq_norm_deferred(ts[0]), float) and sq_norm_deferred(ts[2]) == 0.0 and sq_norm([]) == 0.0
    assert math.isinf(sq_norm(torch.tensor([1.0, math.inf], dtype=dtype)))


@pytest.mark.parametrize("parts", [1, 2, 3, 4, 7])
def test_sq_norm_parts_add_up_to_the_whole(parts):
    """Each rank's share of identical tensors (the monitors' synchronised gradients): the shares cover every
    element once, across tensor boundaries and empty tensors, and add up to sq_norm."""
    from hpcbench.monitors.norms import sq_norm, sq_norm_part

    g = torch.Generator().manual_seed(5)
    ts = [torch.randn(11, generator=g), torch.empty(0), torch.randn(3, 4, generator=g), torch.randn(2, generator=g)]
    shares = [sq_norm_part(ts, p, parts) for p in range(parts)]
    assert sum(shares) == pytest.approx(sq_norm(ts), rel=1e-6)       # float32 dots over other runs
    flat = torch.cat([t.reshape(-1) for t in ts]).double()
    total = flat.numel()
    for p, share in enumerate(shares):     # contiguous runs of nearly equal length
        lo, hi = total * p // parts, total * (p + 1) // parts
        assert share == pytest.approx(float((flat[lo:hi] ** 2).sum()), rel=1e-6, abs=1e-12)
    for bad in [(-1, 2), (2, 2), (0, 0)]:
        with pytest.raises(ValueError, match="part must be in"):
            sq_norm_part(ts, *bad)

"""Allocators: exactness of ``optimal`` against brute force, memory caps, infeasibility, comparisons."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hpcbench.allocation import ALLOCATORS, Allocation, InfeasibleError, Instance, allocate, simulate
from hpcbench.allocation.even import even_bounds


def _brute(inst: Instance, order) -> float:
    """Least bottleneck over every contiguous non-empty split in ``order`` that fits the caps."""
    n, d = inst.num_layers, inst.num_devices
    best = np.inf
    for cuts in itertools.combinations(range(1, n), d - 1):
        alloc = Allocation(order, (0, *cuts, n))
        if np.all(inst.stage_mem_bytes(alloc) <= inst.mem_cap_bytes[alloc.order]):
            best = min(best, inst.bottleneck_s(alloc))
    return best


@st.composite
def instances(draw, max_layers=8, max_devices=4):
    n = draw(st.integers(1, max_layers))
    d = draw(st.integers(1, min(n, max_devices)))
    seed = draw(st.integers(0, 2**31 - 1))
    rng = np.random.default_rng(seed)
    mem = rng.integers(1, 10, n).astype(float)
    caps = rng.integers(3, 30, d).astype(float) if draw(st.booleans()) else None
    spb = rng.uniform(0, 1e-3, d) if draw(st.booleans()) else None
    return Instance(rng.uniform(0.1, 2.0, n), mem, rng.integers(1, 100, n).astype(float),
                    rng.choice([1.0, 2.0, 4.0], d), caps, spb, micro_batches=int(rng.integers(1, 6)))


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(instances())
def test_optimal_equals_brute_force(inst):
    order = np.arange(inst.num_devices)
    want = _brute(inst, order)
    if not np.isfinite(want):
        with pytest.raises(InfeasibleError, match="memory caps"):
            allocate("optimal", inst)
        return
    alloc = allocate("optimal", inst)
    assert alloc.bottleneck_s == pytest.approx(want, rel=1e-9)
    assert np.all(inst.stage_mem_bytes(alloc) <= inst.mem_cap_bytes[alloc.order])
    searched = allocate("optimal", inst, order="search")
    assert searched.bottleneck_s <= alloc.bottleneck_s * (1 + 1e-9)
    best_any = min(_brute(inst, np.array(p)) for p in itertools.permutations(range(inst.num_devices)))
    assert searched.bottleneck_s >= best_any * (1 - 1e-9)


@settings(max_examples=60, deadline=None)
@given(instances())
def test_optimal_never_worse_than_sky_dynamic(inst):
    try:
        dyn = allocate("sky-dynamic", inst)
    except InfeasibleError:
        return
    assert allocate("optimal", inst).bottleneck_s <= dyn.bottleneck_s * (1 + 1e-9)


@pytest.mark.parametrize("seed", range(4))
def test_optimal_never_worse_than_fixed_order_milp(seed):
    rng = np.random.default_rng(seed)
    n, d = 14, 4
    inst = Instance(rng.uniform(0.5, 2, n), rng.uniform(1, 3, n), rng.uniform(1, 9, n), rng.choice([1.0, 4.0], d),
                    np.full(d, 12.0), np.full(d, 1e-3), micro_batches=4)
    milp = allocate("sky-milp", inst, order="fixed", time_limit_s=30)
    assert milp.order.tolist() == list(range(d))
    opt = allocate("optimal", inst)
    assert opt.bottleneck_s <= milp.bottleneck_s * (1 + 1e-9)


def test_memory_caps_honoured_by_every_allocator():
    n, d = 12, 3
    mem = np.ones(n)
    inst = Instance(np.ones(n), mem, np.ones(n), [1.0, 1.0, 4.0], [8.0, 8.0, 2.0])
    for name in ALLOCATORS:
        if name == "even":
            continue
        opts = {"time_limit_s": 30} if name == "sky-milp" else {}
        a = allocate(name, inst, **opts)
        assert np.all(inst.stage_mem_bytes(a) <= inst.mem_cap_bytes[a.order]), name
    with pytest.raises(InfeasibleError, match="device 2, whose cap"):
        allocate("even", inst)   # 4 layers on a device with room for 2


def test_infeasible_instances_rejected_clearly():
    inst = Instance(np.ones(6), np.full(6, 5.0), np.ones(6), [1.0, 1.0], [12.0, 12.0])
    for name, opts in [("optimal", {}), ("optimal", {"order": "search"}), ("sky-dynamic", {}),
                       ("sky-milp", {"time_limit_s": 10})]:
        with pytest.raises(InfeasibleError):
            allocate(name, inst, **opts)
    with pytest.raises(InfeasibleError, match="3 layers cannot fill 4 pipeline stages"):
        allocate("optimal", Instance(np.ones(3), np.ones(3), np.ones(3), np.ones(4)))


def test_even_split_and_sky_dynamic_follow_sky():
    assert even_bounds(10, 4).tolist() == [0, 3, 6, 8, 10]
    inst = Instance(np.ones(16), np.ones(16), np.ones(16), [1.0, 4.0, 1.0, 4.0])
    dyn = allocate("sky-dynamic", inst)
    assert dyn.layers_per_stage.tolist()[0] > 4 and dyn.bottleneck_s < allocate("even", inst).bottleneck_s


@pytest.mark.parametrize("p,m", [(2, 1), (4, 4), (4, 8), (8, 16)])
@pytest.mark.parametrize("schedule", ["gpipe", "1f1b"])
def test_simulated_bubble_matches_formula(p, m, schedule):
    inst = Instance(np.ones(p * 3), np.ones(p * 3), np.ones(p * 3), np.ones(p), micro_batches=m)
    tl = simulate(inst, allocate("even", inst), schedule)
    assert tl.iteration_s == pytest.approx((m + p - 1) * 3.0)
    assert tl.bubble_fraction == pytest.approx((p - 1) / (m + p - 1))


def test_adaptive_estimate_recovers_slowdowns_and_rebalance_reaches_optimal():
    from hpcbench.pipeline.adaptive import estimate_slowdown, rebalance

    rng = np.random.default_rng(1)
    n, d = 30, 5
    inst = Instance(rng.uniform(1, 2, n), np.ones(n), np.full(n, 10.0), np.ones(d), micro_batches=4)
    even = allocate("even", inst)
    true = np.array([1.0, 4.0, 1.0, 2.5, 4.0])
    busy = simulate(inst.with_slowdown(true), even).busy_s
    np.testing.assert_allclose(estimate_slowdown(inst, even.bounds, even.order, busy), true)
    new = rebalance(inst, even.bounds, even.order, busy, "gpipe")
    assert new.bottleneck_s == pytest.approx(allocate("optimal", inst.with_slowdown(true)).bottleneck_s)


def test_sky_dynamic_memory_pass_stops_after_the_move_that_fits():
    """Sky's ``_allocate_by_mem`` checks the caps after every move: stage 0 takes one layer from the
    over-full stage 1 and stops (layers 4, 2, 3), where checking after the whole inner loop kept taking
    layers while stage 0 had room (5, 1, 3). The workload pass then moves boundaries right only."""
    mem = np.array([1, 1, 1, 3, 1, 1, 1, 1, 1], dtype=float)
    inst = Instance(np.array([3, 3, 3, 3, 1, 1, 1, 1, 1], dtype=float), mem, np.ones(9), [1.0, 1.0, 1.0],
                    [10.0, 4.5, 10.0])
    assert allocate("sky-dynamic", inst).layers_per_stage.tolist() == [4, 4, 1]
    assert allocate("sky-dynamic", inst, break_iter=0).layers_per_stage.tolist() == [4, 2, 3]


def test_sky_dynamic_takes_a_layer_only_strictly_below_the_cap():
    """Sky moves a layer onto a stage only if its memory stays strictly below the cap (``<``): with
    stage 0's cap exactly at 6, taking layer 3 (memory 6 = cap) is refused and stage 1 sheds a layer instead."""
    mem = np.array([1, 1, 1, 3, 1, 1, 1, 1, 1], dtype=float)
    inst = Instance(np.ones(9), mem, np.ones(9), [1.0, 1.0, 1.0], [6.0, 4.5, 10.0])
    assert allocate("sky-dynamic", inst, break_iter=0).layers_per_stage.tolist() == [3, 2, 4]
    even_fill = Instance(np.array([1.0, 1.0, 5.0, 1.0]), np.ones(4), np.ones(4), [1.0, 1.0], [3.0, 10.0])
    # workload pass: stage 0 (2 layers, time 2) is under the mean but a third layer would reach its cap 3
    assert allocate("sky-dynamic", even_fill).layers_per_stage.tolist() == [2, 2]
    with pytest.raises(InfeasibleError, match="must exceed the smallest layer"):
        allocate("sky-dynamic", Instance(np.ones(4), np.ones(4), np.ones(4), [1.0, 1.0], [1.0, 10.0]))

"""Sky's MILP (``sky-milp``) with CBC and HiGHS: solved to optimality it equals the exact allocators;
time-limited it reports what it achieved (status, bound, gap, nodes, warm start)."""

from __future__ import annotations

import dataclasses
import itertools

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hpcbench.allocation import InfeasibleError, Instance, allocate
from hpcbench.allocation.milp import SOLVERS, MilpProblem, solve
from hpcbench.allocation.milp.cbc import parse_log
from hpcbench.allocation.sky_milp import formulate

SOLVER_NAMES = sorted(SOLVERS)


@st.composite
def free_link_instances(draw, max_layers=12, max_devices=4):
    """Random instances without links (the MILP has no communication term), some with tight caps."""
    n = draw(st.integers(2, max_layers))
    d = draw(st.integers(2, min(n, max_devices)))
    rng = np.random.default_rng(draw(st.integers(0, 2**31 - 1)))
    mem = rng.integers(1, 10, n).astype(float)
    caps = rng.integers(6, 40, d).astype(float) if draw(st.booleans()) else None
    return Instance(rng.uniform(0.1, 2.0, n), mem, np.ones(n), rng.choice([1.0, 2.0, 4.0], d), caps)


def _milp(inst, solver, order, **opts):
    return allocate("sky-milp", inst, order=order, solver=solver, gap_rel=0.0, time_limit_s=60, **opts)


@pytest.mark.parametrize("solver", SOLVER_NAMES)
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(inst=free_link_instances())
def test_fixed_order_milp_at_optimality_equals_optimal(solver, inst):
    try:
        want = allocate("optimal", inst).bottleneck_s
    except InfeasibleError:
        with pytest.raises(InfeasibleError):
            _milp(inst, solver, "fixed")
        return
    got = _milp(inst, solver, "fixed")
    assert got.info["solver_status"] == "optimal"
    assert got.order.tolist() == list(range(inst.num_devices))
    assert got.bottleneck_s == pytest.approx(want, rel=1e-6)
    assert got.info["milp_objective_s"] == pytest.approx(want, rel=1e-6)
    assert got.info["milp_bound_s"] == pytest.approx(want, rel=1e-6) and got.info["milp_gap"] <= 1e-6


@pytest.mark.parametrize("solver", SOLVER_NAMES)
@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(inst=free_link_instances(max_layers=7, max_devices=3))
def test_free_order_milp_at_optimality_equals_best_order(solver, inst):
    best = np.inf
    for perm in itertools.permutations(range(inst.num_devices)):
        try:
            best = min(best, allocate("optimal", _permuted(inst, perm)).bottleneck_s)
        except InfeasibleError:
            pass
    if not np.isfinite(best):
        with pytest.raises(InfeasibleError):
            _milp(inst, solver, "free")
        return
    got = _milp(inst, solver, "free")
    assert got.info["solver_status"] == "optimal"
    assert got.bottleneck_s == pytest.approx(best, rel=1e-6)


def _permuted(inst, perm):
    p = list(perm)
    return dataclasses.replace(inst, slowdown=inst.slowdown[p], mem_cap_bytes=inst.mem_cap_bytes[p],
                               link_s_per_byte=inst.link_s_per_byte[p])


@pytest.mark.parametrize("solver", SOLVER_NAMES)
def test_milp_at_24_layers_4_devices_equals_optimal(solver):
    rng = np.random.default_rng(7)
    n, d = 24, 4
    mem = rng.uniform(1, 3, n)
    inst = Instance(rng.uniform(0.5, 2, n), mem, np.ones(n), [1.0, 4.0, 1.0, 4.0], np.full(d, mem.sum() / 2))
    got = _milp(inst, solver, "fixed")
    assert got.info["solver_status"] == "optimal"
    assert got.bottleneck_s == pytest.approx(allocate("optimal", inst).bottleneck_s, rel=1e-6)


@pytest.mark.parametrize("solver", SOLVER_NAMES)
def test_time_limited_milp_reports_warm_start_bound_and_gap(solver):
    """A 96 x 24 model stopped after 0.05 s returns the even split it started from, with a valid bound."""
    rng = np.random.default_rng(3)
    n, d = 96, 24
    inst = Instance(rng.uniform(0.5, 2, n), np.ones(n), np.ones(n), np.resize([1.0, 4.0], d), np.full(d, 12.0))
    got = allocate("sky-milp", inst, order="free", solver=solver, time_limit_s=0.05, gap_rel=0.0)
    info = got.info
    assert info["solver_status"] in ("time limit", "no solution")
    assert info["warm_start_returned"] and got.bottleneck_s == allocate("even", inst).bottleneck_s
    assert info["milp_objective_s"] == pytest.approx(got.bottleneck_s)
    best = allocate("optimal", inst, order="search").bottleneck_s
    if np.isfinite(info["milp_bound_s"]):   # a bound is a bound: never above a known solution
        assert info["milp_bound_s"] <= best * (1 + 1e-9)
        assert info["milp_gap"] == pytest.approx(1 - info["milp_bound_s"] / info["milp_objective_s"])
    assert info["milp_nodes"] >= 0


def test_formulation_start_is_the_even_split_and_feasible():
    rng = np.random.default_rng(0)
    inst = Instance(rng.uniform(0.5, 2, 10), np.ones(10), np.ones(10), [1.0, 4.0, 2.0], np.full(3, 5.0))
    problem, scale = formulate(inst, "fixed")
    assert problem.start is not None and problem.is_feasible(problem.start)
    assert problem.start[-1] / scale == pytest.approx(allocate("even", inst).bottleneck_s)
    tight = dataclasses.replace(inst, mem_cap_bytes=np.array([3.0, 5.0, 5.0]))   # even puts 4 layers on device 0
    assert formulate(tight, "fixed")[0].start is None


def test_solvers_agree_on_a_tiny_milp_and_report_infeasible():
    # min x0 + 2 x1  s.t.  x0 + x1 >= 1.5, x integer in [0, 3]
    problem = MilpProblem(np.array([1.0, 2.0]), _csr([[1.0, 1.0]]), np.array([1.5]), np.array([np.inf]),
                          np.zeros(2), np.full(2, 3.0), np.array([True, True]))
    for name in SOLVER_NAMES:
        res = solve(name, problem, time_limit_s=10)
        assert res.status == "optimal" and res.objective == pytest.approx(2.0) and res.gap == pytest.approx(0.0)
    bad = dataclasses.replace(problem, row_lb=np.array([7.0]))
    for name in SOLVER_NAMES:
        assert solve(name, bad, time_limit_s=10).status == "infeasible"


def _csr(rows):
    import scipy.sparse

    return scipy.sparse.csr_matrix(np.array(rows))


def test_bad_solver_and_order_rejected():
    inst = Instance(np.ones(4), np.ones(4), np.ones(4), [1.0, 2.0])
    with pytest.raises(ValueError, match="unknown MILP solver 'gurobi'; choose from cbc, highs"):
        allocate("sky-milp", inst, solver="gurobi")
    with pytest.raises(ValueError, match="order must be 'free' or 'fixed'"):
        allocate("sky-milp", inst, order="given")


def test_cbc_log_summary_parsed():
    log = ("Cbc0010I After 0 nodes, 1 on tree, 9.5673996 best solution, best possible 3.5142385 (9.07 seconds)\n"
           "Result - Stopped on time limit\n\nObjective value:                9.56739957\n"
           "Lower bound:                    3.514\nGap:                            1.72\n"
           "Enumerated nodes:               0\n")
    assert parse_log(log) == {"result": "Stopped on time limit", "objective": 9.56739957, "bound": 3.5142385,
                              "nodes": 0}
    done = "Result - Optimal solution found\n\nObjective value:                5.97199545\nEnumerated nodes: 290\n"
    assert parse_log(done) == {"result": "Optimal solution found", "objective": 5.97199545, "nodes": 290}

"""Schedules of the persistent plans (pure: no MPI): every message has a matching
receive of the same length on its partner, and the reductions follow the generators."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import numpy as np

from hpcbench.collectives.algorithms import get
from hpcbench.collectives.algorithms.rabenseifner import rabenseifner_schedule
from hpcbench.collectives.algorithms.recursive_doubling import recursive_doubling_schedule
from hpcbench.collectives.algorithms.ring import SEGMENT_BYTES, ring_schedule
from hpcbench.collectives.algorithms.weighted_shards import weighted_shards_schedule
from hpcbench.collectives.persistent import Span, Step, post_points

SCHEDULED = ["ring", "recursive_doubling", "rabenseifner", "weighted_shards"]


def _weighted(n, rank, count, itemsize, inplace):
    """The weighted-shard schedule with uneven shards and rank 0 owning none (the slow-link choice)."""
    return weighted_shards_schedule(n, rank, count, itemsize, inplace, weights=[0.0] + [1.0 + i for i in
                                                                                        range(n - 1)])


def _length(s: Span) -> int:
    return s.hi - s.lo


def _check_matching(build, n, count, itemsize, inplace):
    """Step k of rank r sends to d what step k of rank d receives from r, same length;
    spans stay inside their arrays; no step both reduces into and sends one span."""
    plans = [build(n, r, count, itemsize, inplace) for r in range(n)]
    if plans[0] is None:
        assert all(p is None for p in plans)
        return
    steps = {len(p) for p in plans}
    assert len(steps) == 1
    for r, plan in enumerate(plans):
        for k, step in enumerate(plan):
            assert isinstance(step, Step)
            peer = plans[step.dest][k]
            assert peer.source == r
            assert _length(peer.recv) == _length(step.send)
            for s in (step.send, step.recv, *(step.reduce or ()), step.finalize):
                if s is None:
                    continue
                assert 0 <= s.lo <= s.hi and (s.buf == "tmp" or s.hi <= count)
            assert step.recv.buf != "src"          # src is only read
            if step.reduce is not None:
                assert step.reduce[0].buf == "dst"


@settings(max_examples=200, deadline=None)
@given(n=st.integers(2, 9), count=st.integers(1, 60), itemsize=st.sampled_from([4, 8]),
       inplace=st.booleans())
def test_messages_match_their_receives(n, count, itemsize, inplace):
    _check_matching(ring_schedule, n, count, itemsize, inplace)
    _check_matching(recursive_doubling_schedule, n, count, itemsize, inplace)
    _check_matching(rabenseifner_schedule, n, count, itemsize, inplace)
    _check_matching(weighted_shards_schedule, n, count, itemsize, inplace)
    _check_matching(_weighted, n, count, itemsize, inplace)


def _simulate(build, n, count, inplace, posted=False):
    """Run every rank's schedule in lockstep on integer inputs (rank r holds ``r * 1000 +
    arange``): each step copies every send span into its receiver's recv span, then
    runs the reductions; returns each rank's ``dst``. ``posted``: at the start of the
    step where :func:`post_points` posts a receive, its span is overwritten with junk
    (from then on MPI owns it), so a step that read it before its own receive, or
    whose write into it the receive would lose, gives a wrong sum."""
    plans = [build(n, r, count, 8, inplace) for r in range(n)]
    bufs = []
    for r in range(n):
        src = r * 1000 + np.arange(count, dtype=np.int64)
        dst = src if inplace else np.full(count, -7, dtype=np.int64)
        bufs.append({"src": src, "dst": dst, "tmp": np.full(3 * count, -9, dtype=np.int64)})
    points = [post_points(p) for p in plans]
    for k in range(len(plans[0])):
        for r, p in enumerate(plans):
            for j, at in enumerate(points[r]):
                if posted and at == k:
                    bufs[r][p[j].recv.buf][p[j].recv.lo:p[j].recv.hi] = -123456789
        sent = [bufs[r][p[k].send.buf][p[k].send.lo:p[k].send.hi].copy()
                for r, p in enumerate(plans)]
        for r, p in enumerate(plans):
            rv = plans[p[k].source][k]
            assert rv.dest == r
            bufs[r][p[k].recv.buf][p[k].recv.lo:p[k].recv.hi] = sent[p[k].source]
        for r, p in enumerate(plans):
            if p[k].reduce is not None:
                out, a, b = (bufs[r][s.buf][s.lo:s.hi] for s in p[k].reduce)
                np.add(a, b, out=out)
    return [b["dst"] for b in bufs]


@pytest.mark.parametrize("build", [ring_schedule, recursive_doubling_schedule,
                                   rabenseifner_schedule, weighted_shards_schedule, _weighted])
@pytest.mark.parametrize("n", [2, 4, 8])
@pytest.mark.parametrize("count", [1, 3, 8, 37])
@pytest.mark.parametrize("inplace", [False, True])
@pytest.mark.parametrize("posted", [False, True])
def test_schedules_leave_the_sum_on_every_rank(build, n, count, inplace, posted):
    want = sum(r * 1000 + np.arange(count, dtype=np.int64) for r in range(n))
    for got in _simulate(build, n, count, inplace, posted):
        np.testing.assert_array_equal(got, want)


def test_post_points_of_the_ring_and_of_a_reused_scratch():
    """The ring out of place posts its reduce-scatter receives (distinct blocks of dst) at
    step 0 and each allgather receive once the step sending from that block is done;
    in place, and recursive doubling, reuse one scratch span: each at its own step."""
    assert post_points(ring_schedule(4, 1, 40, 4, inplace=False)) == [0, 0, 0, 1, 2, 3]
    assert post_points(ring_schedule(4, 1, 40, 4, inplace=True)) == [0, 1, 2, 2, 2, 3]
    assert post_points(recursive_doubling_schedule(8, 5, 40, 4, False)) == [0, 1, 2]
    for build in (ring_schedule, recursive_doubling_schedule, rabenseifner_schedule):
        for n in (2, 4, 8):
            for r in range(n):
                for inplace in (False, True):
                    plan = build(n, r, 37, 8, inplace)
                    points = post_points(plan)
                    assert all(p <= k for k, p in enumerate(points))
                    assert points == sorted(points)


@pytest.mark.parametrize("n", [2, 3, 4, 5, 8])
def test_ring_every_block_reduced_once_per_rank_then_owned(n):
    """Steps 0..n-2 reduce n-1 distinct blocks; the last of them is the rank's own block
    (finalized there); the allgather steps only receive."""
    count = 10 * n + 3
    for r in range(n):
        plan = ring_schedule(n, r, count, 4, inplace=False)
        assert len(plan) == 2 * (n - 1)
        reduced = [s.reduce[0] for s in plan[:n - 1]]
        assert all(s.reduce is not None for s in plan[:n - 1])
        assert all(s.reduce is None and s.finalize is None for s in plan[n - 1:])
        assert len(set(reduced)) == n - 1
        assert plan[n - 2].finalize == reduced[-1]
        received = {(s.recv.lo, s.recv.hi) for s in plan[n - 1:]}
        assert (reduced[-1].lo, reduced[-1].hi) not in received


def test_ring_in_place_reduces_through_the_scratch():
    plan = ring_schedule(4, 1, 40, 4, inplace=True)
    for s in plan[:3]:
        assert s.recv.buf == "tmp" and s.reduce[2] == s.recv and s.reduce[1] == s.reduce[0]
    out_of_place = ring_schedule(4, 1, 40, 4, inplace=False)
    for s in out_of_place[:3]:
        assert s.recv == s.reduce[0] and s.reduce[2].buf == "src"


def test_ring_declines_blocks_over_one_segment():
    per_block = SEGMENT_BYTES // 4
    assert ring_schedule(2, 0, 2 * per_block, 4, False) is not None
    assert ring_schedule(2, 0, 2 * per_block + 2, 4, False) is None


def test_recursive_doubling_lower_rank_first_and_powers_of_two_only():
    assert recursive_doubling_schedule(3, 0, 8, 4, False) is None
    assert recursive_doubling_schedule(6, 5, 8, 4, False) is None
    plan0 = recursive_doubling_schedule(4, 0, 8, 4, False)
    plan3 = recursive_doubling_schedule(4, 3, 8, 4, False)
    assert [s.dest for s in plan0] == [1, 2] and [s.dest for s in plan3] == [2, 1]
    # rank 0 is the lower partner: its own vector first; rank 3 the higher: received first
    assert plan0[0].reduce == (Span("dst", 0, 8), Span("src", 0, 8), Span("tmp", 0, 8))
    assert plan3[0].reduce == (Span("dst", 0, 8), Span("tmp", 0, 8), Span("src", 0, 8))
    assert plan0[1].send == Span("dst", 0, 8)      # later steps send the partial result
    assert plan0[0].finalize is None and plan0[1].finalize == Span("dst", 0, 8)


def test_registry_attaches_schedules():
    assert get("ring").schedule is ring_schedule
    assert get("recursive_doubling").schedule is recursive_doubling_schedule
    assert get("rabenseifner").schedule is rabenseifner_schedule


def test_rabenseifner_halves_then_doubles_lower_rank_first():
    assert rabenseifner_schedule(6, 0, 12, 4, False) is None
    plan1 = rabenseifner_schedule(4, 1, 8, 4, False)     # blocks of 2 elements
    assert [s.dest for s in plan1] == [3, 0, 0, 3]
    # d = 2: rank 1 keeps blocks 0-1 and sends its input's blocks 2-3; it is the lower partner
    assert plan1[0].send == Span("src", 4, 8)
    assert plan1[0].reduce == (Span("dst", 0, 4), Span("src", 0, 4), Span("tmp", 0, 4))
    # d = 1: rank 1 keeps block 1, the higher partner: the received half first
    assert plan1[1].reduce == (Span("dst", 2, 4), Span("tmp", 0, 2), Span("dst", 2, 4))
    assert plan1[1].finalize == Span("dst", 2, 4)
    # then it sends its block and receives block 0, then blocks 2-3
    assert (plan1[2].send, plan1[2].recv) == (Span("dst", 2, 4), Span("dst", 0, 2))
    assert (plan1[3].send, plan1[3].recv) == (Span("dst", 0, 4), Span("dst", 4, 8))


@pytest.mark.mpi
def test_plans_are_freed_before_mpi_finalize():
    """MPICH prints a line per live persistent request when mpi4py finalizes at Python's
    shutdown: none may be left (the runners' exit_process runs the same hook)."""
    from mpitools import run_mpi

    script = ("import numpy as np, hpcbench.collectives as hc\n"
              "x = np.ones(64)\n"
              "for alg in ('ring', 'recursive_doubling', 'auto'):\n"
              "    y = hc.allreduce(x, algorithm=alg)\n"
              "assert y[0] == 2.0\n")
    proc = run_mpi(2, ["-c", script], timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "persistent request" not in proc.stderr, proc.stderr

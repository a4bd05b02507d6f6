"""The runtime's one host-grouping helper and one timing harness, at any world size."""

from __future__ import annotations

import statistics
import time

import numpy as np

from hpcbench.runtime.hosts import gather_hostnames, group_ranks, host_groups, hostname, single_host
from hpcbench.runtime.timing import (iteration_times, max_over_ranks, min_over_ranks, reduce_over_ranks,
                                     timed)


def test_group_ranks_orders_hosts_by_first_rank():
    assert group_ranks(["a", "b", "a", "c", "b"]) == [[0, 2], [1, 4], [3]]
    assert group_ranks(["a", "b", "a", "c", "b"], ranks=[4, 3, 2]) == [[4], [3], [2]]
    assert group_ranks(["a", "b", "a", "c", "b"], ranks=[1, 2, 3, 4]) == [[1, 4], [2], [3]]
    assert group_ranks([]) == []


def test_host_groups_partition_the_communicator(comm):
    names = gather_hostnames(comm)
    assert len(names) == comm.size and names[comm.rank] == hostname()
    groups = host_groups(comm)
    assert sorted(r for g in groups for r in g) == list(range(comm.size))
    assert all(len({names[r] for r in g}) == 1 for g in groups)
    assert [g[0] for g in groups] == sorted(g[0] for g in groups)
    assert single_host(comm) == (len(groups) == 1)
    # a sub-communicator gets its own grouping (no cache keyed on whichever came first)
    sub = comm.Split(comm.rank % 2, comm.rank)
    try:
        assert sorted(r for g in host_groups(sub) for r in g) == list(range(sub.size))
    finally:
        sub.Free()


def test_reductions_over_ranks(comm):
    r, n = comm.rank, comm.size
    np.testing.assert_array_equal(max_over_ranks(comm, [r, -r]), [n - 1, 0])
    np.testing.assert_array_equal(min_over_ranks(comm, [r, -r]), [0, -(n - 1)])
    got = reduce_over_ranks(comm, (float(r), float(r)), (max, statistics.mean))
    assert got == [n - 1, statistics.mean(float(i) for i in range(n))]


def test_timed_counts_the_slowest_rank(comm):
    delay = 0.002 * comm.rank
    t = timed(comm, lambda: time.sleep(delay))
    assert t.wall_s >= delay and 0 <= t.cpu_s < t.wall_s + 0.01
    slowest = max_over_ranks(comm, [t.wall_s])[0]
    assert slowest >= 0.002 * (comm.size - 1)
    calls = []
    times = iteration_times(comm, lambda: calls.append(1), iters=4, warmup=2)
    assert times.shape == (4,) and len(calls) == 7 and (times >= 0).all()   # + 1 after the line-up
    calls.clear()
    iteration_times(comm, lambda: calls.append(1), iters=5, warmup=0, block=2)
    assert len(calls) == 8                              # line-ups before timed calls 0, 2, 4
    np.testing.assert_array_equal(times, comm.bcast(times, root=0))   # every rank holds the max

"""Node-aware paths at any world size and host layout (one host, or emulated hosts:
``tests/test_multihost.py`` runs this file at 2x2, 3+1 and 4x1 hosts).

Where ``HPCBENCH_TEST_HOSTS`` names the layout (``"2,2"``), the grouping must be it.
"""

from __future__ import annotations

import os

import numpy as np

import hpcbench.collectives as hc
from hpcbench.collectives._core import context_for
from hpcbench.runtime.device import node_local
from hpcbench.runtime.hosts import gather_hostnames, gather_machines, host_groups, oversubscription
from hpcbench.runtime import provenance


def _layout(comm) -> list[int]:
    return [len(g) for g in host_groups(comm)]


def test_host_groups_are_the_launched_layout(comm):
    want = os.environ.get("HPCBENCH_TEST_HOSTS")
    groups = host_groups(comm)
    if want:
        assert [len(g) for g in groups] == [int(k) for k in want.split(",")]
        start = 0
        for g in groups:             # Hydra fills hosts in order: contiguous blocks
            assert g == list(range(start, start + len(g)))
            start += len(g)
    names = gather_hostnames(comm)
    assert len(set(names)) == len(groups)


def test_node_local_rank_counts_within_the_host(comm):
    rank, size = node_local(comm)
    g = next(g for g in host_groups(comm) if comm.rank in g)
    assert (rank, size) == (g.index(comm.rank), len(g))


def test_provenance_lists_every_host(comm):
    names = gather_hostnames(comm)
    info = provenance.collect(comm, names, 1, provenance.utc_now())
    assert info["hostnames"].split(",") == names
    assert info["unique_hosts"] == len(set(names))
    # oversubscription is judged per machine: emulated hosts of one machine share its cores
    machines = gather_machines(comm)
    if os.environ.get("HPCBENCH_TEST_HOSTS"):
        assert set(machines) == {"+".join(sorted(set(names)))}
    text = oversubscription(machines, [1] * len(names))
    assert all(f"{m}: {machines.count(m)} ranks" in text for m in set(machines) if machines.count(m) > 1)


def _reference(comm, x, op):
    """MPI's reduction of ``x`` (sum, then divided for avg)."""
    from mpi4py import MPI

    out = np.empty_like(x)
    comm.Allreduce(x, out, op=MPI.MAX if op == "max" else MPI.SUM)
    return out / comm.size if op == "avg" else out


def test_host_aware_allreduces_match_mpi_and_agree_bitwise(comm):
    """binary_tree_star and hierarchical, grouped by host (the default) and in blocks of 2, at sizes
    that leave shards empty or uneven."""
    rng = np.random.default_rng(comm.rank)
    for alg in ("binary_tree_star", "hierarchical"):
        for local_size in (None, 2):
            for n in (1, 5, 1023, 70001):
                for op in ("sum", "avg", "max"):
                    x = rng.standard_normal(n)
                    y = hc.allreduce(x, op=op, algorithm=alg, comm=comm, local_size=local_size)
                    np.testing.assert_allclose(y, _reference(comm, x, op), rtol=1e-12, atol=1e-12)
                    everyone = comm.allgather(y.tobytes())
                    assert all(b == everyone[0] for b in everyone), (alg, local_size, n, op)
                    z = x.copy()
                    assert hc.allreduce(z, z, op=op, algorithm=alg, comm=comm, local_size=local_size) is z
                    assert z.tobytes() == y.tobytes()
                    w = hc.iallreduce(x, op=op, algorithm=alg, comm=comm, local_size=local_size).wait()
                    assert w.tobytes() == y.tobytes()


def test_hierarchical_bits_do_not_depend_on_timing(comm):
    """Deterministic: the same inputs give the same bits, call after call, blocking or not."""
    x = np.random.default_rng(7 + comm.rank).standard_normal(4099).astype(np.float32)
    first = hc.allreduce(x, op="avg", algorithm="hierarchical", deterministic=True, comm=comm)
    for _ in range(3):
        assert hc.iallreduce(x, op="avg", algorithm="hierarchical", comm=comm).wait().tobytes() == first.tobytes()


def test_hierarchical_sends_a_shard_across_hosts(comm):
    """Only the shard owners talk across hosts: per rank, at most (G-1)/G of m/S bytes go to other hosts in
    the reduce-scatter and as many in the allgather (S shards: the smallest host's ranks)."""
    from hpcbench.collectives.transport import Transport

    groups = host_groups(comm)
    host_of = {r: i for i, g in enumerate(groups) for r in g}
    sent_to: dict[int, int] = {}

    class Counting(Transport):
        def isend(self, buf, dest, tag):
            sent_to[dest] = sent_to.get(dest, 0) + buf.nbytes
            return super().isend(buf, dest, tag)

    tr = Counting(comm)
    x = np.ones(1 << 14)
    hc.allreduce(x, algorithm="hierarchical", transport=tr)
    across = sum(b for d, b in sent_to.items() if host_of[d] != host_of[comm.rank])
    nhosts, nshards = len(groups), min(len(g) for g in groups)
    bound = 2 * (nhosts - 1) / nhosts * x.nbytes / nshards + 16 * nhosts
    assert across <= bound, (across, bound, _layout(comm))
    context_for(comm)                       # the world's context is untouched by a private transport

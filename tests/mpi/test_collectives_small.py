"""Small-message paths: the ring's inline form and iallreduce waits driven by the caller."""

from __future__ import annotations

import numpy as np
import pytest

import hpcbench.collectives as hc
from hpcbench.collectives.algorithms import ring

OPS = ["sum", "avg", "max", "min"]


@pytest.mark.parametrize("dtype", ["float32", "float64", "int64"])
def test_ring_inline_gives_the_generators_bytes(comm, dtype):
    n = comm.size
    for count in (1, n + 1, 1000, 70_000):
        for op in OPS:
            rng = np.random.default_rng([comm.rank, count])
            x = (rng.standard_normal(count) * 100).astype(dtype)
            want = hc.iallreduce(x, op=op, algorithm="ring", comm=comm).wait()
            y = hc.allreduce(x, op=op, algorithm="ring", comm=comm)
            assert y.tobytes() == want.tobytes()
            z = x.copy()
            assert hc.allreduce(z, z, op=op, algorithm="ring", comm=comm) is z
            assert z.tobytes() == want.tobytes()
            ref = np.empty_like(x)
            comm.Allreduce(x.astype(np.float64) if dtype != "int64" else x,
                           ref if dtype == "int64" else (ref := ref.astype(np.float64)))
            if op == "sum":
                tol = 1e-3 * n if dtype == "float32" else 1e-10 * n   # inputs of size ~100
                np.testing.assert_allclose(y, ref, rtol=0, atol=tol)


def test_ring_inline_declines_multi_segment_blocks(comm, monkeypatch):
    """Blocks above one segment take the pipelined generator (same result)."""
    monkeypatch.setattr(ring, "SEGMENT_BYTES", 256)
    x = np.arange(2000, dtype=np.float64) + comm.rank
    y = hc.allreduce(x, algorithm="ring", comm=comm)
    n = comm.size
    np.testing.assert_array_equal(y, n * np.arange(2000) + n * (n - 1) / 2)


def test_iallreduce_waits_drive_many_outstanding(comm):
    """Several named requests outstanding, waited in reverse order, while the progress
    thread also advances them: every result right."""
    n = comm.size
    xs = [np.full(k * 300 + 1, float(comm.rank + k), dtype=np.float32) for k in range(6)]
    reqs = [hc.iallreduce(x, algorithm=a, comm=comm, name=f"b{k}")
            for k, (x, a) in enumerate(zip(xs, ["ring", "auto"] * 3))]
    for k in reversed(range(6)):
        got = reqs[k].wait()
        assert np.all(got == n * k + n * (n - 1) / 2)
        assert reqs[k].test()

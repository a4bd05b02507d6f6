"""MPI runtime helpers: chunked transfers and sleeping waits, at any world size."""

from __future__ import annotations

import numpy as np
import pytest

from hpcbench.runtime.chunked import eager_bytes, irecv_chunked, isend_chunked
from hpcbench.runtime.wait import Backoff, sleep_waitall


@pytest.mark.parametrize("nbytes,chunk", [(n, c) for n in (0, 1, 7999, 8000, 8001, 100_003) for c in (None, 1000)]
                         + [(0, 3), (1, 3), (10, 3), (11, 3)])
def test_chunked_ring_roundtrip(comm, nbytes, chunk):
    """Every rank sends a distinct buffer to its right neighbour; the left one's arrives intact."""
    right, left = (comm.rank + 1) % comm.size, (comm.rank - 1) % comm.size
    rng = np.random.default_rng([comm.rank, nbytes])
    send = rng.integers(0, 256, nbytes, dtype=np.uint8)
    recv = np.full(nbytes, 7, dtype=np.uint8)
    reqs = irecv_chunked(comm, recv, left, 11, chunk) + isend_chunked(comm, send, right, 11, chunk)
    step = chunk or eager_bytes()
    assert len(reqs) == 2 * max(1, -(-nbytes // step))
    sleep_waitall(reqs, Backoff(max_s=1e-3))
    expected = np.random.default_rng([left, nbytes]).integers(0, 256, nbytes, dtype=np.uint8)
    np.testing.assert_array_equal(recv, expected)


def test_chunked_typed_buffer_keeps_values(comm):
    """A 2-D float64 buffer goes through as bytes and comes back bit for bit."""
    right, left = (comm.rank + 1) % comm.size, (comm.rank - 1) % comm.size
    send = np.arange(3 * 1001, dtype=np.float64).reshape(3, 1001) * (comm.rank + 0.5)
    recv = np.zeros_like(send)
    sleep_waitall(irecv_chunked(comm, recv, left, 12, 4096) + isend_chunked(comm, send, right, 12, 4096))
    np.testing.assert_array_equal(recv, np.arange(3 * 1001, dtype=np.float64).reshape(3, 1001) * (left + 0.5))


def test_chunked_rejects_non_contiguous(comm):
    with pytest.raises(ValueError, match="C-contiguous"):
        isend_chunked(comm, np.zeros((4, 4))[:, 1], 0, 1)


def test_eager_bytes_env(monkeypatch):
    monkeypatch.setenv("HPCBENCH_EAGER_BYTES", "4096")
    assert eager_bytes() == 4096
    for bad in ("0", "-5", "lots"):
        monkeypatch.setenv("HPCBENCH_EAGER_BYTES", bad)
        with pytest.raises(ValueError, match="HPCBENCH_EAGER_BYTES"):
            eager_bytes()


def test_sleep_waitall_many_messages_any_order(comm):
    """Hundreds of small messages from every rank to rank 0, received in one sleeping wait."""
    per_rank = 200
    if comm.rank == 0:
        bufs = {src: np.full(per_rank, -1, dtype=np.int64) for src in range(comm.size)}
        reqs = [comm.Irecv(bufs[src][i:i + 1], source=src, tag=13)
                for src in range(comm.size) for i in range(per_rank)]
    else:
        reqs = []
    data = np.arange(per_rank, dtype=np.int64) + 1000 * comm.rank
    reqs += [comm.Isend(data[i:i + 1], dest=0, tag=13) for i in range(per_rank)]
    sleep_waitall(reqs, Backoff(max_s=1e-3))
    if comm.rank == 0:
        for src, buf in bufs.items():
            np.testing.assert_array_equal(buf, np.arange(per_rank) + 1000 * src)


def test_sleep_waitall_empty_and_null():
    from mpi4py import MPI

    sleep_waitall([])
    sleep_waitall([MPI.REQUEST_NULL, MPI.REQUEST_NULL])

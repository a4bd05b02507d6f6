"""Dataset inputs loaded on rank 0 and broadcast (``build_dataset(..., comm)``), at any world size."""

from __future__ import annotations

import pytest
import torch

from hpcbench.fl.config import DatasetConfig
from hpcbench.fl.data import build_dataset


def test_broadcast_inputs_equal_local_load(comm):
    cfg = DatasetConfig(num_clients=12, alpha=0.3)
    shared, local = build_dataset(cfg, 3, comm), build_dataset(cfg, 3)
    for a, b in zip(shared.test_set(), local.test_set()):
        assert torch.equal(a, b)
    assert shared.num_clients == local.num_clients == 12
    for cid in range(12):
        sa, sb = shared.shard(cid), local.shard(cid)
        assert sa.num_examples == sb.num_examples
        idx = torch.arange(sa.num_examples)
        for a, b in zip(sa.batch(idx), sb.batch(idx)):
            assert torch.equal(a, b)


def test_load_error_on_rank_0_raises_on_every_rank(comm, monkeypatch):
    def broken(cls, cfg, seed):
        raise OSError("digits file unreadable")

    monkeypatch.setattr("hpcbench.fl.data.load_in_child", broken)  # rank 0 loads through it
    with pytest.raises((OSError, ValueError), match="digits file unreadable"):
        build_dataset(DatasetConfig(num_clients=5), 1, comm)


def test_node_shared_arrays_one_copy_per_node(comm, tmp_path_factory):
    """Image sets are read by one rank per node and mapped read-only by the others (hpcbench.datasets.nodeshare)."""
    import numpy as np
    from mpi4py import MPI

    from hpcbench.datasets.nodeshare import node_shared

    calls = []

    def load():
        calls.append(1)
        return {"x": np.arange(24, dtype=np.uint8).reshape(2, 3, 4), "y": np.array([5, 7], dtype=np.int64)}

    arrays = node_shared(comm, load)
    np.testing.assert_array_equal(arrays["x"], np.arange(24).reshape(2, 3, 4))
    assert arrays["y"].tolist() == [5, 7] and arrays["x"].dtype == np.uint8
    node = comm.Split_type(MPI.COMM_TYPE_SHARED)
    assert node.allreduce(len(calls)) == 1                       # loaded once on the node
    if comm.size > 1:
        assert not arrays["x"].flags.writeable
    node.Free()

    def broken():
        raise OSError("image folder unreadable")

    with pytest.raises(OSError, match="image folder unreadable"):
        node_shared(comm, broken)

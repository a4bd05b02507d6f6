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

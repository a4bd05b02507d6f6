"""The collective benchmark's interleaved rounds: every implementation takes its turns, on shared buffers."""

from __future__ import annotations

import argparse

import numpy as np
import pytest

from hpcbench.bench.collectives.backends import Backend
from hpcbench.bench.collectives.job import CollectivesJob
from hpcbench.runtime.interleave import balanced_orders


class _Recorder(Backend):
    """A backend whose calls append its name and the buffer it ran on to a shared log."""

    def __init__(self, name: str, log: list, torch_buffers: bool = False) -> None:
        self.name, self.log, self.torch_buffers = name, log, torch_buffers

    def allreduce(self, b, comm):
        return lambda: self.log.append((self.name, id(b.x)))

    reduce_scatter = allgather = bcast = allreduce


def _job(names, rounds, torch_kinds=()):
    from mpi4py import MPI

    job = CollectivesJob(MPI.COMM_SELF)
    job.cfg = argparse.Namespace(op="allreduce", dtype="float32", redop="sum", rounds=rounds, device="cpu")
    job.device = argparse.Namespace(is_cuda=False)
    log: list = []
    job.backends = {n: _Recorder(n, log, n in torch_kinds) for n in names}
    return job, log


def _blocks(log):
    """Consecutive runs of one name in the log: [(name, calls), ...]."""
    out = []
    for name, _ in log:
        if out and out[-1][0] == name:
            out[-1][1] += 1
        else:
            out.append([name, 1])
    return [tuple(b) for b in out]


@pytest.mark.parametrize("names,rounds,iters,warm", [
    (["mpi", "ring"], 5, 12, 2), (["mpi", "ring", "auto"], 3, 5, 1), (["mpi", "ring", "auto", "tree"], 4, 9, 0),
    (["mpi", "ring"], 1, 6, 1), (["mpi", "ring"], 8, 3, 1)])
def test_every_implementation_times_its_iterations_in_interleaved_rounds(names, rounds, iters, warm):
    job, log = _job(names, rounds)
    times = job._interleaved(64, iters, warm)
    assert list(times) == names
    for t in times.values():
        assert t.shape == (iters,) and t.dtype == np.float64 and (t >= 0).all()
    r = min(rounds, iters)
    orders = balanced_orders(len(names))
    expect = []
    for k in range(r):
        share = iters // r + (k < iters % r)
        for j in orders[k % len(orders)]:
            # warm-up calls on the first round, then one untimed call after the line-up, then the share
            expect.append((names[j], (warm if k == 0 else 0) + 1 + share))
    assert _blocks(log) == expect


def test_implementations_of_one_kind_share_buffers_and_kinds_do_not():
    job, log = _job(["mpi", "ring", "gloo"], 2, torch_kinds=("gloo",))
    job._interleaved(32, 4, 1)
    buffers = {}
    for name, ident in log:
        buffers.setdefault(name, set()).add(ident)
    assert all(len(v) == 1 for v in buffers.values())
    assert buffers["mpi"] == buffers["ring"] and buffers["gloo"] != buffers["mpi"]


def test_no_implementation_left_times_nothing():
    job, log = _job([], 5)
    assert job._interleaved(64, 10, 1) == {} and log == []

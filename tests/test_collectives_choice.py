"""``auto``'s choice by size and world size, and the bounded spin of blocking waits."""

from __future__ import annotations

import time

import pytest

from hpcbench.collectives import CROSSOVER, choose_algorithm
from hpcbench.collectives.algorithms import get
from hpcbench.runtime.wait import Backoff


def test_small_buffers_take_recursive_doubling_or_tree():
    for p in (1, 2, 3, 64):
        assert choose_algorithm(CROSSOVER["small"] - 1, p) == "recursive_doubling"
        assert choose_algorithm(0, p, deterministic=True) == "tree"


def test_ring_needs_larger_buffers_on_more_ranks():
    m = CROSSOVER["medium"]
    assert choose_algorithm(2 * m, 4) == "ring"
    assert choose_algorithm(2 * m - 1, 4) == "rabenseifner"
    # at 2 ranks ring and Rabenseifner send the same messages: always the ring
    assert choose_algorithm(CROSSOVER["small"], 2) == "ring"
    # the same 1 MiB buffer: ring on 2 ranks (512 KiB blocks), Rabenseifner on 16 (64 KiB)
    assert choose_algorithm(1 << 20, 2) == "ring"
    assert choose_algorithm(1 << 20, 16) == "rabenseifner"
    assert choose_algorithm(8 * m, 16) == "ring"
    assert choose_algorithm(8 * m - 1, 16) == "rabenseifner"
    for p in (2, 5, 64):
        for nbytes in (CROSSOVER["small"], m, 64 << 20):
            assert get(choose_algorithm(nbytes, p)).deterministic or nbytes < CROSSOVER["small"]


def test_choose_algorithm_rejects_bad_sizes():
    with pytest.raises(ValueError, match="nranks"):
        choose_algorithm(1024, 0)
    with pytest.raises(ValueError, match="nbytes"):
        choose_algorithm(-1, 2)


def test_schedules():
    assert get("recursive_doubling").schedule is not None
    assert get("ring").schedule is not None
    assert get("rabenseifner").schedule is not None
    assert get("tree").schedule is None


def test_backoff_spin_is_bounded_in_time_then_sleeps():
    slept = []
    bo = Backoff(spin=0, spin_s=2e-3, first_s=1e-5, max_s=4e-5, sleep=slept.append)
    t0 = time.perf_counter()
    while not slept:
        bo.pause()
    assert time.perf_counter() - t0 >= 2e-3
    for _ in range(3):
        bo.pause()
    assert slept == [1e-5, 2e-5, 4e-5, 4e-5]
    bo.reset()
    bo.pause()                    # spinning again after a reset
    assert len(slept) == 4
    with pytest.raises(ValueError, match="spin_s"):
        Backoff(spin_s=-1.0)

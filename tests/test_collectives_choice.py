"""``auto``'s choice by size and world size, and the bounded spin of blocking waits."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from hpcbench.collectives import CROSSOVER, choose_algorithm
from hpcbench.collectives.algorithms import get
from hpcbench.runtime.wait import Backoff


def test_small_buffers_take_recursive_doubling_or_tree():
    largest = min(CROSSOVER["eager"], CROSSOVER["small"] - 1)     # the eager limit is a setting
    assert largest > 0
    for p in (1, 2, 3, 64):
        assert choose_algorithm(largest, p) == "recursive_doubling"
        assert choose_algorithm(0, p, deterministic=True) == "tree"


def test_no_full_vector_above_the_eager_limit():
    """Between the eager limit and ``small``, no rendezvous-sized full vectors: the ring at
    2 ranks, Rabenseifner above (deterministic either way)."""
    for nbytes in {min(CROSSOVER["eager"] + 1, CROSSOVER["small"]), CROSSOVER["small"] - 1}:
        if nbytes <= CROSSOVER["eager"]:
            continue                        # a setting above ``small``: nothing in between
        assert choose_algorithm(nbytes, 2) == "ring"
        assert choose_algorithm(nbytes, 4) == choose_algorithm(nbytes, 64) == "rabenseifner"
        assert choose_algorithm(nbytes, 4, deterministic=True) == "rabenseifner"


def test_eager_crossover_follows_the_setting():
    code = ("from hpcbench.collectives import CROSSOVER, choose_algorithm; "
            "print(CROSSOVER['eager'], choose_algorithm(4096, 4), choose_algorithm(4097, 4))")
    env = {**os.environ, "HPCBENCH_EAGER_BYTES": "4096"}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                         timeout=120, check=True).stdout.split()
    assert out == ["4096", "recursive_doubling", "rabenseifner"]


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
    with pytest.raises(ValueError, match="world_size"):
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

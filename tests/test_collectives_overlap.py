"""The overlap benchmark's method: hidden share per repetition, rotation of the order."""

from __future__ import annotations

import numpy as np

from hpcbench.bench.collectives.overlap import hidden_shares, rotation


def test_hidden_shares_cases():
    # fully hidden, half hidden, nothing hidden, worse than serial, no comm
    got = hidden_shares([10, 10, 10, 10, 0], [20, 20, 20, 20, 20], [20, 25, 30, 35, 20])
    np.testing.assert_allclose(got[:4], [1.0, 0.5, 0.0, -0.5])
    assert np.isnan(got[4])


def test_hidden_shares_pairs_repetitions():
    # a load spike slows every measurement of repetition 1 alike: its share is unchanged,
    # whereas mixing medians across repetitions would not be
    comm = np.array([10.0, 30.0, 10.0])
    comp = np.array([20.0, 60.0, 20.0])
    both = np.array([22.0, 66.0, 22.0])
    np.testing.assert_allclose(hidden_shares(comm, comp, both), [0.8, 0.8, 0.8])


def test_rotation_balances_positions():
    orders = [rotation(i) for i in range(9)]
    for kind in ("comm", "compute", "both"):
        positions = [o.index(kind) for o in orders]
        assert sorted(positions) == [0, 0, 0, 1, 1, 1, 2, 2, 2]
    assert all(sorted(o) == ["both", "comm", "compute"] for o in orders)

"""Williams designs for interleaved entries (``hpcbench.runtime.interleave``)."""

from __future__ import annotations

from collections import Counter

import pytest

from hpcbench.runtime.interleave import balanced_orders


@pytest.mark.parametrize("n", range(1, 13))
def test_every_entry_follows_every_other_equally_often_and_never_itself(n):
    rounds = balanced_orders(n)
    assert len(rounds) == (1 if n <= 2 else n if n % 2 == 0 else 2 * n)
    assert all(sorted(r) == list(range(n)) for r in rounds)
    within = Counter((a, b) for r in rounds for a, b in zip(r, r[1:]))
    if n >= 3:
        assert set(within) == {(a, b) for a in range(n) for b in range(n) if a != b}
        assert len(set(within.values())) == 1          # each ordered pair alike: once (even n), twice (odd)
        # (not for two entries: they alternate, and a position within a round means nothing there)
        positions = Counter((e, i) for r in rounds for i, e in enumerate(r))
        assert len(set(positions.values())) == 1 and len(positions) == n * n   # every entry at every position
    for prev, nxt in zip(rounds, rounds[1:] + rounds[:1]):
        assert n == 1 or prev[-1] != nxt[0]


def test_no_entries_is_refused():
    with pytest.raises(ValueError, match="n must be >= 1"):
        balanced_orders(0)

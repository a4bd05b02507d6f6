"""Orders for running several measured entries in turn, balanced for what each leaves behind.

A side-by-side run on one machine takes its entries' iterations in turn, so
that a drift of the machine's load falls on all of them alike. Plain round
robin (A B C D, A B C D, ...) has a second bias: every entry always follows
the same one (A always follows D), and what ran before an entry moves it
(its replica in the caches, another library's threads). With ResNet-18 at
2 ranks, ``scripts/train_step_costs.py`` read the ring's throughput over
Horovod's 1.036-1.066 with the ring following no synchroniser and
0.992-1.019 with it following Horovod, in three alternating pairs of runs;
in the ``train-targets`` job under round robin, ``ring:priority`` (the
ring with another schedule, always after the ring) read 1.049x the ring
(always after Horovod) over 16 runs, and 0.990x with this design
(docs/train.md).

:func:`balanced_orders` gives the rounds of a Williams design (Williams,
"Experimental designs balanced for the estimation of residual effects of
treatments", Australian Journal of Scientific Research A 2(2), 1949), the
crossover trials' answer to first-order carryover: within its ``n`` rounds
(``2 n`` for an odd ``n``) every entry follows every other entry equally
often and never itself, and every entry holds every position equally often.
The rounds are chained so that a round never starts with the entry the
round before ended with (an entry following itself is measured warm).
"""

from __future__ import annotations

__all__ = ["balanced_orders"]


def balanced_orders(n: int) -> list[list[int]]:
    """The rounds of a Williams design over ``n`` entries, chained without an entry following itself.

    Parameters
    ----------
    n : int
        Number of entries, >= 1.

    Returns
    -------
    list of list of int
        Rounds, each a permutation of ``range(n)``: one round for ``n`` <= 2
        (``[0, 1]``: alternation is already balanced), ``n`` rounds for an
        even ``n``, ``2 n`` for an odd one. Taken cyclically (the last round
        then the first again), no round starts with the entry that ended the
        one before.

    Raises
    ------
    ValueError
        ``n`` < 1.
    """
    if n < 1:
        raise ValueError(f"n must be >= 1, got {n!r}")
    if n <= 2:
        return [list(range(n))]
    base, lo, hi = [0], 1, n - 1
    while len(base) < n:          # 0, 1, n-1, 2, n-2, ...: the differences of neighbours are all distinct
        base.append(lo)
        lo += 1
        if len(base) < n:
            base.append(hi)
            hi -= 1
    rows = [[(b + i) % n for b in base] for i in range(n)]
    if n % 2:
        rows += [r[::-1] for r in rows]
    return _chain(rows)


def _chain(rows: list[list[int]]) -> list[list[int]]:
    """``rows`` reordered so that, cyclically, no row starts with its predecessor's last entry (depth-first)."""
    path, used = [0], [True] + [False] * (len(rows) - 1)

    def extend() -> bool:
        if len(path) == len(rows):
            return rows[path[-1]][-1] != rows[path[0]][0]
        for k in range(len(rows)):
            if not used[k] and rows[k][0] != rows[path[-1]][-1]:
                used[k] = True
                path.append(k)
                if extend():
                    return True
                path.pop()
                used[k] = False
        return False

    if not extend():        # not met for any n >= 3 (tests/test_interleave.py checks n up to 12)
        raise AssertionError(f"no chaining of the {len(rows)} rounds")
    return [rows[k] for k in path]

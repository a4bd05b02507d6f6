"""Memory a call allocates: what tests check instead of wall time where work must stay small."""

from __future__ import annotations

import tracemalloc


def peak_mb(fn, *args):
    """Peak megabytes Python allocated while ``fn(*args)`` ran (raising or not), and its exception (or None).

    A refused YAML alias or pickle memo bomb allocates kilobytes; expanding one (10**8 leaves and more) would take
    gigabytes. Unlike a bound on wall time, this does not move with the machine's load.
    """
    tracemalloc.start()
    error = None
    try:
        fn(*args)
    except Exception as exc:  # noqa: BLE001 - returned to the caller, who checks its type
        error = exc
    finally:
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
    return peak / 1e6, error

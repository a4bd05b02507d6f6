"""A bound on how long a benchmark may run, checked from its settings before anything starts.

A count typed with a few digits too many (``-n 10**12``, ``--reps 10**12``)
asks for a run of years; the benchmark would start, allocate and never
finish. Each benchmark runner computes a *lower bound* of its run time from
its settings alone (every timed call costs at least :data:`CALL_FLOOR_S`
plus the bytes it touches read once at :data:`MEMORY_BYTES_PER_S`, faster
than any node's memory; a modelled link's predicted time where there is
one) and :func:`check_run_time` refuses a run whose bound exceeds
:data:`MAX_RUN_S` with an input error naming the keys and values
(docs/architecture.md, "Data-safety guarantees": bad input).
"""

from __future__ import annotations

from hpcbench.runtime.errors import InputError

__all__ = ["MAX_RUN_S", "CALL_FLOOR_S", "MEMORY_BYTES_PER_S", "call_floor_s", "check_run_time"]

#: Longest run accepted, in seconds, by the lower bound of its settings: a week.
MAX_RUN_S = 7 * 86400.0
#: Least time of one timed call of a collective or a compressor, in seconds (a function call, a
#: clock read and, for a collective, one message).
CALL_FLOOR_S = 1e-6
#: Bytes per second a call can touch at most (above any node's memory bandwidth).
MEMORY_BYTES_PER_S = 1e11


def call_floor_s(nbytes: float) -> float:
    """Least seconds of one call touching ``nbytes`` bytes: :data:`CALL_FLOOR_S` + ``nbytes / MEMORY_BYTES_PER_S``."""
    return CALL_FLOOR_S + float(nbytes) / MEMORY_BYTES_PER_S


def _duration(seconds: float) -> str:
    for unit, scale in (("years", 365 * 86400.0), ("days", 86400.0), ("hours", 3600.0)):
        if seconds >= scale:
            return f"{seconds / scale:.3g} {unit}"
    return f"{seconds:.3g} s"


def check_run_time(seconds: float, keys: str) -> None:
    """Refuse a run whose lower-bound duration ``seconds`` exceeds :data:`MAX_RUN_S`.

    Parameters
    ----------
    seconds : float
        Lower bound of the run's duration from its settings.
    keys : str
        The settings that make it (``"-n/--iters 1000000000000 x 12 sizes x 3 algorithms"``).

    Raises
    ------
    InputError
        ``seconds > MAX_RUN_S`` (or not a number); the message names ``keys``
        and states the bound.
    """
    if not seconds <= MAX_RUN_S:
        raise InputError(f"{keys}: the run would take at least {_duration(seconds)} (each timed call at least "
                         f"{CALL_FLOOR_S * 1e6:g} us plus its bytes at {MEMORY_BYTES_PER_S / 1e9:g} GB/s), more "
                         f"than the bound of {_duration(MAX_RUN_S)}; lower them")

"""Keep large, short-lived buffers from staying in a process's heap (glibc's ``mallopt`` and
``malloc_trim``).

glibc serves an allocation of at least ``M_MMAP_THRESHOLD`` bytes (128 KiB
at start) with its own ``mmap``, returned to the system on ``free``. But the
threshold is dynamic: freeing such a block raises it to that block's size (up
to 32 MiB), after which blocks of that size come from the ``brk`` heap and
stay resident after ``free`` whenever a live allocation sits above them. A
federated round allocates and frees blocks of tens of megabytes on every rank
(updates received, stacked and aggregated), so the heap grows to the largest
round's working set plus fragmentation and keeps it for the rest of the run.

Setting the threshold explicitly (``mallopt(M_MMAP_THRESHOLD, ...)``, which
also turns the dynamic adjustment off) keeps every block above it in its own
mapping, returned at ``free``. The same effect as the environment variable
``MALLOC_MMAP_THRESHOLD_``; numerical results do not change.

The price is paid by code that allocates and frees the same large blocks
over and over: a torch training step allocates every gradient and activation
anew, so under a fixed threshold each step maps, faults in (zeroing every
page) and unmaps tens of megabytes. Training LEAF's CNN (6.5 M parameters)
spent 40 % of its time in the kernel that way. :func:`reusing_heap` is the
window for such code: inside it blocks up to 32 MiB come from the heap and
stay there for the next step; on leaving, the threshold is fixed again and
the heap trimmed, so nothing of the window stays resident.
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
from collections.abc import Iterator

__all__ = ["fix_mmap_threshold", "reusing_heap", "trim_heap"]

_M_TRIM_THRESHOLD = -1  # glibc <malloc.h>
_M_MMAP_THRESHOLD = -3
_MMAP_THRESHOLD_MAX = 32 << 20  # glibc's cap on 64-bit systems (DEFAULT_MMAP_THRESHOLD_MAX)
_TRIM_THRESHOLD_DEFAULT = 128 << 10  # glibc's M_TRIM_THRESHOLD at start

#: the threshold :func:`fix_mmap_threshold` set in this process (None: never set, glibc's dynamic one)
_fixed_threshold: int | None = None


@functools.lru_cache(maxsize=1)
def _libc() -> ctypes.CDLL | None:
    """The C library already loaded in this process (no ``ldconfig`` subprocess, as
    ``ctypes.util.find_library`` would start inside every MPI rank)."""
    try:
        return ctypes.CDLL(None)
    except OSError:
        return None


def fix_mmap_threshold(nbytes: int = 256 << 10) -> bool:
    """Serve every allocation of ``nbytes`` or more by ``mmap`` for the rest of the process.

    Parameters
    ----------
    nbytes : int
        Threshold in bytes (glibc caps it at 32 MiB on 64-bit systems).

    Returns
    -------
    bool
        True if glibc accepted the setting; False where there is no glibc
        (macOS, musl), where the call is skipped.

    Raises
    ------
    ValueError
        If ``nbytes`` is not positive.
    """
    if nbytes <= 0:
        raise ValueError(f"nbytes must be positive, got {nbytes}")
    try:
        mallopt = _libc().mallopt
    except AttributeError:  # no glibc (or no C library handle)
        return False
    mallopt.argtypes = (ctypes.c_int, ctypes.c_int)
    ok = bool(mallopt(_M_MMAP_THRESHOLD, int(nbytes)))
    if ok:
        global _fixed_threshold
        _fixed_threshold = int(nbytes)
    return ok


@contextlib.contextmanager
def reusing_heap() -> Iterator[bool]:
    """Inside the block, keep freed blocks of up to 32 MiB in the heap for reuse; trim them on leaving.

    Only where :func:`fix_mmap_threshold` fixed the threshold in this
    process (elsewhere glibc's dynamic threshold already reuses such blocks,
    and the block runs unchanged). Inside, the mmap threshold is glibc's cap
    (32 MiB) and the trim threshold is raised, so that a freed gradient is
    not returned to the system at once; on leaving (also by an exception),
    both go back (the mmap threshold to the fixed value, the trim threshold
    to glibc's 128 KiB) and :func:`trim_heap` returns the free memory.
    Blocks allocated inside and kept beyond it stay in the heap until freed.
    Numerical results do not change.

    Yields
    ------
    bool
        True if the window applies (glibc, threshold fixed), else False.
    """
    fixed = _fixed_threshold
    mallopt = getattr(_libc(), "mallopt", None) if fixed is not None else None
    if mallopt is None:
        yield False
        return
    mallopt.argtypes = (ctypes.c_int, ctypes.c_int)
    mallopt(_M_MMAP_THRESHOLD, _MMAP_THRESHOLD_MAX)
    mallopt(_M_TRIM_THRESHOLD, 1 << 30)
    try:
        yield True
    finally:
        mallopt(_M_MMAP_THRESHOLD, fixed)
        mallopt(_M_TRIM_THRESHOLD, _TRIM_THRESHOLD_DEFAULT)
        trim_heap()


def trim_heap() -> bool:
    """Return the free memory at the top of the heap and in free chunks to the system.

    glibc keeps freed memory for reuse: after the first large block is freed
    its dynamic mmap threshold rises (up to 32 MiB), so later buffers of tens
    of MB (gradient buckets, a profiled model's activations) come from the
    heap and stay in the process once freed. ``malloc_trim(0)`` releases them.

    Returns
    -------
    bool
        True if glibc's ``malloc_trim`` was called (False on other C libraries).
    """
    try:
        _libc().malloc_trim(0)
    except AttributeError:
        return False
    return True

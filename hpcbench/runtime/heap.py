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
"""

from __future__ import annotations

import ctypes
import functools

__all__ = ["fix_mmap_threshold", "trim_heap"]

_M_MMAP_THRESHOLD = -3  # glibc <malloc.h>


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
    return bool(mallopt(_M_MMAP_THRESHOLD, int(nbytes)))


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

"""Keep large, short-lived buffers from staying in a process's heap (glibc's ``mallopt``).

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
import ctypes.util

__all__ = ["fix_mmap_threshold"]

_M_MMAP_THRESHOLD = -3  # glibc <malloc.h>


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
    name = ctypes.util.find_library("c")
    if name is None:
        return False
    try:
        libc = ctypes.CDLL(name)
        mallopt = libc.mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes = (ctypes.c_int, ctypes.c_int)
    return bool(mallopt(_M_MMAP_THRESHOLD, int(nbytes)))

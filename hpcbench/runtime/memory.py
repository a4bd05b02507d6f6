"""Giving a process's freed heap back to the system."""

from __future__ import annotations

import ctypes
import ctypes.util

__all__ = ["trim_heap"]


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
        ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):
        return False
    return True

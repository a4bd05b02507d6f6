"""Access to Numba for the few compiled loops of hpcbench (imported on first use).

The loops (the top-k candidate scan, the sparse scatter-add) are inner loops
of compression that numpy can only express as several passes over memory.
Numba compiles them on first call and caches the machine code next to the
module (``cache=True``), so later processes load it instead of compiling.
Processes that never compress a large tensor never import Numba (about
0.3 s and 60 MB per rank).

Set ``HPCBENCH_JIT=off`` to run every such loop on its numpy/torch path
instead: results are bitwise the same (the tests compare both paths).
"""

from __future__ import annotations

import os

__all__ = ["enabled", "njit"]

_numba = None


def enabled() -> bool:
    """True when Numba is importable and ``HPCBENCH_JIT`` is not ``off``/``0``/``numpy``."""
    if os.environ.get("HPCBENCH_JIT", "on").strip().lower() in ("off", "0", "numpy", "false", "no"):
        return False
    global _numba
    if _numba is None:
        try:
            import numba
        except ImportError:
            _numba = False
        else:
            _numba = numba
    return _numba is not False


def njit(fn):
    """Compile ``fn`` with ``numba.njit(cache=True, nogil=True, boundscheck=False)``.

    Raises
    ------
    RuntimeError
        If :func:`enabled` is False.
    """
    if not enabled():
        raise RuntimeError("compiled loops are off (HPCBENCH_JIT) or numba is not installed")
    return _numba.njit(cache=True, nogil=True, boundscheck=False)(fn)

"""MPI runtime helpers shared by every hpcbench job.

Submodules are imported on first use, so that :mod:`hpcbench.runtime.wakeup`
can be set up before mpi4py (which starts threads) is imported.
"""

from __future__ import annotations

import importlib

__all__ = ["Backoff", "sleep_wait", "sleep_waitall", "sleep_wait_streams", "sleep_barrier", "sleep_bcast"]


def __getattr__(name: str):
    if name in __all__:
        return getattr(importlib.import_module("hpcbench.runtime.wait"), name)
    raise AttributeError(f"module 'hpcbench.runtime' has no attribute {name!r}")

"""Work that must be done before ``MPI_Finalize``, however the process ends.

A program ends MPI in one of two ways here: Python's shutdown (mpi4py
finalizes after Python's ``atexit`` handlers have run), or
:func:`hpcbench.lifecycle.exit.exit_process`, which calls ``MPI.Finalize``
itself and leaves through the C library's ``exit`` without running Python's
handlers. Functions given to :func:`before_finalize` run once, on whichever
comes first: e.g. freeing persistent MPI requests, which MPICH otherwise
reports one line each at finalize.
"""

from __future__ import annotations

import atexit
import sys
from typing import Callable

__all__ = ["before_finalize", "run_before_finalize"]

_HOOKS: list[Callable[[], None]] = []


def before_finalize(fn: Callable[[], None]) -> Callable[[], None]:
    """Register ``fn`` (no arguments) to run before MPI finalizes; usable as a decorator."""
    _HOOKS.append(fn)
    return fn


def run_before_finalize() -> None:
    """Run and forget every registered function, while MPI is still initialized.

    A function that raises is reported on stderr and the others still run.
    """
    mpi = sys.modules.get("mpi4py.MPI")
    if mpi is None or not mpi.Is_initialized() or mpi.Is_finalized():
        _HOOKS.clear()
        return
    while _HOOKS:
        fn = _HOOKS.pop(0)
        try:
            fn()
        except Exception as exc:  # noqa: BLE001 - shutting down: report, go on
            print(f"hpcbench: before MPI_Finalize, {getattr(fn, '__qualname__', fn)} "
                  f"failed: {exc!r}", file=sys.stderr)


atexit.register(run_before_finalize)

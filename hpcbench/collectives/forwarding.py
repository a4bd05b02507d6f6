"""The former names of the benchmarks (``hpcbench.collectives.bench``, ``.compress_bench``) forward to their runners.

A forwarding module imports nothing above core: its ``main`` runs the runner's
own ``__main__`` by name, as ``python -m RUNNER`` would, and that ends the
process through the job lifecycle (:func:`hpcbench.lifecycle.main`).
"""

from __future__ import annotations

import runpy
import sys
from typing import Callable

__all__ = ["forwarder"]


def forwarder(runner: str) -> Callable[[list[str] | None], int]:
    """The ``main(argv=None)`` of a forwarding module: runs package ``runner`` as ``__main__``; never returns.

    ``argv`` (default: this process's arguments) replaces ``sys.argv[1:]``;
    the runner's ``__main__`` exits with the job's status.
    """
    def main(argv: list[str] | None = None) -> int:
        if argv is not None:
            sys.argv[1:] = list(argv)
        runpy.run_module(runner, run_name="__main__", alter_sys=True)
        return 0  # pragma: no cover - the runner's __main__ exits

    main.__doc__ = f"Run ``python -m {runner}`` with ``argv``; never returns (the job lifecycle ends the process)."
    return main

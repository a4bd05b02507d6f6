"""Run ``python -m hpcbench.fl ARGS`` and record, per rank, whether torch was imported.

``python tests/torch_free_run.py OUTDIR ARGS...`` (under ``mpiexec``): runs the
job as ``python -m hpcbench.fl ARGS`` would, and just before the process
exits (the lifecycle leaves through the C library's ``exit``, so Python's
``atexit`` does not run) writes ``OUTDIR/rank<R>.txt`` with ``torch`` or
``no torch``. Used by ``tests/test_fl_numpy.py``.
"""

from __future__ import annotations

import os
import runpy
import sys
from pathlib import Path


def main() -> None:
    outdir = Path(sys.argv[1])
    sys.argv = ["hpcbench.fl", *sys.argv[2:]]
    from hpcbench.lifecycle import exit as process_exit

    c_exit = process_exit._c_exit

    def record_then_exit(status: int) -> None:
        rank = os.environ.get("PMI_RANK", "0")
        (outdir / f"rank{rank}.txt").write_text("torch" if "torch" in sys.modules else "no torch")
        c_exit(status)

    process_exit._c_exit = record_then_exit
    runpy.run_module("hpcbench.fl", run_name="__main__")


if __name__ == "__main__":
    main()

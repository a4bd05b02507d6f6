"""``python -m hpcbench.train [CONFIG.yaml] [--KEY VALUE ...]``: data-parallel training on MPI ranks.

Run it under MPI, one worker per rank (``mpiexec -n 2 python -m hpcbench.train
jobs/configs/train-quick.yaml``). Exit status: 0 on success, 2 on bad input
(nothing written), 1 on any other failure on any rank.
"""

from __future__ import annotations

import sys

__all__ = ["main"]


def main(argv: list[str] | None = None) -> int:
    """Entry point: the shared lifecycle with :class:`hpcbench.train.job.TrainJob`."""
    from hpcbench.lifecycle import main as run_main

    return run_main("hpcbench.train.job:TrainJob", argv)


if __name__ == "__main__":
    sys.exit(main())

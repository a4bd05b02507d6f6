"""``python -m hpcbench.pipeline [CONFIG.yaml] [--KEY VALUE ...]``: pipeline stages on MPI ranks.

Run it under MPI, one rank per stage (``mpiexec -n 8 python -m hpcbench.pipeline
jobs/configs/pipeline-quick.yaml``). Exit status: 0 on success, 2 on bad
input or an allocation that cannot fit the memory caps (nothing written), 1
on any other failure on any rank.
"""

from __future__ import annotations

import sys

__all__ = ["main"]


def main(argv: list[str] | None = None) -> int:
    """Entry point: the shared lifecycle with :class:`hpcbench.pipeline.job.PipelineJob`."""
    from hpcbench.lifecycle import main as run_main

    return run_main("hpcbench.pipeline.job:PipelineJob", argv)


if __name__ == "__main__":
    sys.exit(main())

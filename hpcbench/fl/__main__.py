"""``python -m hpcbench.fl [CONFIG.yaml] [--KEY VALUE ...]``: run a federated emulation job.

Run it under MPI (``mpirun -np 64 python -m hpcbench.fl jobs/configs/digits.yaml``):
rank 0 aggregates, the other ranks execute the emulated clients. With no file,
the defaults run: the digits job of ``jobs/configs/digits.yaml``. ``--help``
lists every config key with its default and meaning; ``--fedscale-conf
conf.yml`` reads a FedScale job file (docs/fl.md).
Exit status: 0 on success, 2 on bad input (nothing written), 1 on any other
failure on any rank (every rank ends; see :mod:`hpcbench.lifecycle`).
"""

from __future__ import annotations

import sys

__all__ = ["main"]


def main(argv: list[str] | None = None) -> int:
    """Entry point: the shared lifecycle with :class:`hpcbench.fl.job.FLJob`."""
    from hpcbench.lifecycle import main as run_main

    return run_main("hpcbench.fl.job:FLJob", argv)


if __name__ == "__main__":
    sys.exit(main())

"""Forwarding module: ``python -m hpcbench.collectives.compress_bench`` runs :mod:`hpcbench.bench.compress`.

The benchmark is a runner (:mod:`hpcbench.bench`); this module keeps users' scripts
and ``jobs/compress.sbatch`` working and imports nothing from the runner, nor from the job
lifecycle above core, until it runs (:mod:`hpcbench.collectives.forwarding`).
"""

from __future__ import annotations

import sys

from hpcbench.collectives.forwarding import forwarder

__all__ = ["main"]

main = forwarder("hpcbench.bench.compress")

if __name__ == "__main__":
    sys.exit(main())

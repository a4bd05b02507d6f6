"""Forwarding module: ``python -m hpcbench.collectives.compress_bench`` runs :mod:`hpcbench.bench.compress`.

The benchmark is a runner (:mod:`hpcbench.bench`); this module keeps users' scripts
and ``jobs/compress.sbatch`` working and imports nothing from the runner until it runs.
"""

from __future__ import annotations

import sys

from hpcbench.runtime.lifecycle import entry

__all__ = ["main"]

main = entry("hpcbench.bench.compress.job:CompressJob")

if __name__ == "__main__":
    sys.exit(main())

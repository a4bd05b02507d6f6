"""Forwarding module: ``python -m hpcbench.collectives.bench`` runs :mod:`hpcbench.bench.collectives`.

The benchmark is a runner (:mod:`hpcbench.bench`); this module keeps users' scripts
and ``jobs/collectives.sbatch`` working and imports nothing from the runner until it runs.
"""

from __future__ import annotations

import sys

from hpcbench.runtime.lifecycle import entry

__all__ = ["main"]

main = entry("hpcbench.bench.collectives.job:CollectivesJob")

if __name__ == "__main__":
    sys.exit(main())

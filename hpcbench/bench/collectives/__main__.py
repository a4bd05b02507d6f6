"""``python -m hpcbench.bench.collectives``: the collective benchmark under the shared lifecycle."""

from __future__ import annotations

import sys

from hpcbench.lifecycle import entry

__all__ = ["main"]

main = entry("hpcbench.bench.collectives.job:CollectivesJob")

if __name__ == "__main__":
    sys.exit(main())

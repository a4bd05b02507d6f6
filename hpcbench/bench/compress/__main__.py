"""``python -m hpcbench.bench.compress``: the compression benchmark under the shared lifecycle."""

from __future__ import annotations

import sys

from hpcbench.lifecycle import entry

__all__ = ["main"]

main = entry("hpcbench.bench.compress.job:CompressJob")

if __name__ == "__main__":
    sys.exit(main())

"""``python -m hpcbench.reproduce``: the same as ``hpcbench reproduce``."""

import sys

from hpcbench.reproduce.command import main

sys.exit(main())

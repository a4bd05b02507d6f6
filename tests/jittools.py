"""Run code with the compiled loops off (``HPCBENCH_JIT=off``): their numpy paths, for bitwise comparisons."""

from __future__ import annotations

import contextlib
import os


@contextlib.contextmanager
def jit_off():
    """Within the block, :func:`hpcbench.runtime.jit.enabled` is False."""
    old = os.environ.get("HPCBENCH_JIT")
    os.environ["HPCBENCH_JIT"] = "off"
    try:
        yield
    finally:
        if old is None:
            del os.environ["HPCBENCH_JIT"]
        else:
            os.environ["HPCBENCH_JIT"] = old

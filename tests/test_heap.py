"""hpcbench.runtime.heap: the fixed mmap threshold."""

from __future__ import annotations

import ctypes.util
import platform

import numpy as np
import pytest

from hpcbench.runtime.heap import fix_mmap_threshold


def test_fix_mmap_threshold():
    with pytest.raises(ValueError, match="nbytes"):
        fix_mmap_threshold(0)
    accepted = fix_mmap_threshold(1 << 20)
    if platform.system() == "Linux" and platform.libc_ver()[0] == "glibc" and ctypes.util.find_library("c"):
        assert accepted is True
    a = np.ones(4 << 20)  # allocations still work and hold their values
    assert a.sum() == 4 << 20

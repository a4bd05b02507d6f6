"""hpcbench.runtime.heap: the fixed mmap threshold and ``trim_heap`` give freed buffers of tens of MB
back to the system. Each check runs in a fresh interpreter (the settings are process-wide) without
the ``MALLOC_*`` variables that would change glibc's policy."""

from __future__ import annotations

import os
import platform
import subprocess
import sys
import textwrap

import pytest

from hpcbench.runtime.heap import fix_mmap_threshold

GLIBC = platform.system() == "Linux" and platform.libc_ver()[0] == "glibc"

# Frees 96 MB of buffers that glibc would keep in its heap: a 24 MB block freed first raises the
# dynamic mmap threshold, so the four later ones come from brk, and live allocations sit above them.
_SCENARIO = """
import numpy as np
from hpcbench.runtime.heap import fix_mmap_threshold, trim_heap

def anon_mb():
    for line in open("/proc/self/smaps_rollup"):
        if line.startswith("Anonymous:"):
            return int(line.split()[1]) / 1024

{setup}
first = np.ones(6_000_000, np.float32)
del first
buckets = [np.ones(6_000_000, np.float32) for _ in range(4)]
pin = [bytearray(4096) for _ in range(64)]
base = anon_mb()
del buckets
kept = anon_mb()
{after}
print(round(base), round(kept), round(anon_mb()))
"""


def _scenario(setup: str, after: str) -> tuple[int, int, int]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MALLOC_")}
    code = textwrap.dedent(_SCENARIO).format(setup=setup, after=after)
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env=env)
    assert proc.returncode == 0, proc.stderr[-1500:]
    base, kept, final = map(int, proc.stdout.split())
    return base, kept, final


def test_fix_mmap_threshold_rejects_a_non_positive_size():
    with pytest.raises(ValueError, match="nbytes"):
        fix_mmap_threshold(0)


@pytest.mark.skipif(not GLIBC, reason="glibc's malloc policy (Linux)")
def test_without_either_glibc_keeps_the_freed_buffers():
    base, kept, final = _scenario("", "")
    assert kept > base - 20 and final > base - 20


@pytest.mark.skipif(not GLIBC, reason="glibc's malloc policy (Linux)")
def test_fixed_mmap_threshold_returns_the_buffers_at_free():
    base, kept, _ = _scenario("assert fix_mmap_threshold(1 << 20)", "")
    assert kept < base - 80


@pytest.mark.skipif(not GLIBC, reason="glibc's malloc policy (Linux)")
def test_trim_heap_returns_the_freed_buffers():
    base, kept, trimmed = _scenario("", "assert trim_heap()")
    assert kept > base - 20          # glibc kept the freed heap (the behaviour trim_heap exists for)
    assert trimmed < base - 80       # ... and gave back most of the 96 MB


# Allocates (glibc's malloc), touches and frees a 20 MB buffer three times, counting the page faults of the last two:
# under a fixed threshold each one is a fresh mapping (about 5,000 faults of 4 KiB pages); inside
# reusing_heap the block stays in the heap after its first use. Then the heap after the window.
_REUSE = """
import ctypes
import resource
from hpcbench.runtime.heap import fix_mmap_threshold, reusing_heap

def anon_mb():
    for line in open("/proc/self/smaps_rollup"):
        if line.startswith("Anonymous:"):
            return int(line.split()[1]) / 1024

libc = ctypes.CDLL(None)
libc.malloc.restype = ctypes.c_void_p
libc.free.argtypes = (ctypes.c_void_p,)

def use_once():  # malloc, touch every page, free (as torch's CPU allocator does; numpy asks for huge pages)
    block = libc.malloc(20 << 20)
    ctypes.memset(block, 1, 20 << 20)
    libc.free(block)

def faults_of_reuse():
    use_once()
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    for _ in range(2):
        use_once()
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before

{setup}
base = anon_mb()
outside = faults_of_reuse()
with reusing_heap() as applies:
    inside = faults_of_reuse()
    held = anon_mb()
print(int(applies), outside, inside, round(held - base), round(anon_mb() - base))
"""


def _reuse(setup: str) -> tuple[int, ...]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MALLOC_")}
    proc = subprocess.run([sys.executable, "-c", textwrap.dedent(_REUSE).format(setup=setup)],
                          capture_output=True, text=True, timeout=120, env=env)
    assert proc.returncode == 0, proc.stderr[-1500:]
    return tuple(map(int, proc.stdout.split()))


@pytest.mark.skipif(not GLIBC, reason="glibc's malloc policy (Linux)")
def test_reusing_heap_keeps_freed_blocks_inside_and_returns_them_after():
    applies, outside, inside, held, after = _reuse("assert fix_mmap_threshold()")
    assert applies == 1
    assert outside > 8000            # two fresh mappings of 20 MB, faulted in page by page
    assert inside < outside / 4      # the second and third buffers reused the first one's pages
    assert held > 15                 # the freed 20 MB stayed in the heap inside the window ...
    assert after < 5                 # ... and was trimmed on leaving it


@pytest.mark.skipif(not GLIBC, reason="glibc's malloc policy (Linux)")
def test_reusing_heap_changes_nothing_where_the_threshold_was_never_fixed():
    applies, _, _, _, _ = _reuse("")
    assert applies == 0


@pytest.mark.skipif(not GLIBC, reason="glibc's malloc policy (Linux)")
def test_reusing_heap_restores_the_fixed_threshold_after_an_exception():
    code = textwrap.dedent("""
        import numpy as np
        from hpcbench.runtime.heap import fix_mmap_threshold, reusing_heap

        def anon_mb():
            for line in open("/proc/self/smaps_rollup"):
                if line.startswith("Anonymous:"):
                    return int(line.split()[1]) / 1024

        fix_mmap_threshold()
        try:
            with reusing_heap():
                raise KeyError("inside")
        except KeyError:
            pass
        blocks = [np.ones(6_000_000, np.float32) for _ in range(4)]
        pin = bytearray(4096)
        base = anon_mb()
        del blocks
        print(round(base - anon_mb()))
    """)
    env = {k: v for k, v in os.environ.items() if not k.startswith("MALLOC_")}
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env=env)
    assert proc.returncode == 0, proc.stderr[-1500:]
    assert int(proc.stdout) > 80     # the fixed threshold is back: 96 MB returned at free

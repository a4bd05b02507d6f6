"""``hpcbench.runtime.memory.trim_heap``: freed buffers of tens of MB leave the process."""

from __future__ import annotations

import subprocess
import sys
import textwrap


def test_trim_heap_returns_freed_buckets_to_the_system():
    code = textwrap.dedent("""
        import numpy as np
        from hpcbench.runtime.memory import trim_heap

        def anon_mb():
            for line in open("/proc/self/smaps_rollup"):
                if line.startswith("Anonymous:"):
                    return int(line.split()[1]) / 1024

        first = np.ones(6_000_000, np.float32)       # 24 MB: mmapped; freeing it raises glibc's threshold
        del first
        buckets = [np.ones(6_000_000, np.float32) for _ in range(4)]    # now from the heap
        pin = [bytearray(4096) for _ in range(64)]    # later, live allocations above them in the heap
        base = anon_mb()
        del buckets
        kept = anon_mb()
        assert trim_heap()
        print(round(base), round(kept), round(anon_mb()))
    """)
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr[-1500:]
    base, kept, trimmed = map(int, proc.stdout.split())
    assert kept > base - 20                 # glibc kept the freed heap (the behaviour trim_heap exists for)
    assert trimmed < base - 80              # ... and gave back most of the 96 MB

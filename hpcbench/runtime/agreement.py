"""Every rank stops together: the first error any rank saw, agreed collectively.

The job lifecycle (:mod:`hpcbench.lifecycle`) agrees after each stage that can
fail on bad input (parse, configure, prepare, open the outputs); a runner or a
core check that runs a collective step of its own (a device probe) agrees the
same way, so that no rank waits for one that gave up.
"""

from __future__ import annotations

__all__ = ["agree"]


def agree(comm, error: str | None) -> str | None:
    """First error any rank saw (collective), so that every rank stops together.

    Early ranks sleep in a barrier first instead of spinning in MPI's
    blocking allgather (64 ranks importing torch on 2 cores take a minute).
    """
    if comm.size == 1:
        return error
    from hpcbench.runtime.wait import Backoff, sleep_barrier

    sleep_barrier(comm, Backoff(first_s=1e-3, max_s=5e-2))
    errors = comm.allgather(error)
    return next((e for e in errors if e), None)

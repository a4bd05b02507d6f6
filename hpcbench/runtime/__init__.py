"""MPI runtime helpers shared by every hpcbench job."""

from hpcbench.runtime.wait import Backoff, sleep_wait, sleep_waitall, sleep_barrier, sleep_bcast

__all__ = ["Backoff", "sleep_wait", "sleep_waitall", "sleep_barrier", "sleep_bcast"]

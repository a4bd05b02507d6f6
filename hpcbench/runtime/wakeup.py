"""Node-local wake-ups, so that a rank waiting on MPI can sleep long and still react at once.

A waiting rank polls ``Request.Test`` and sleeps in between
(:mod:`hpcbench.runtime.wait`). Short sleeps cost CPU: 60 idle executors on
2 cores, each waking every 20 ms, preempt the ranks that train thousands of
times a second and slowed them by more than half in our runs. Long sleeps
delay the reaction to a message. A :class:`Waker` removes that trade-off for
ranks on the same node: the waiting rank sleeps in ``sigtimedwait`` on a
blocked signal, and the rank that sent it a message sends that signal after
the message, so the sleeper wakes at once and finds the message there. The
timeout is a fallback that keeps polling correct when a signal is lost or the
peer is on another node (no signal crosses nodes).

The signal is ``SIGURG``: its default action is to be ignored, so a signal
sent to the wrong process would be harmless; it is only ever sent to ranks
that share this rank's host name and PID namespace, and it stays blocked in
every thread of a rank that uses a Waker (a pending blocked signal is kept
until ``sigtimedwait`` takes it). Platforms without ``sigtimedwait`` (macOS,
Windows) fall back to plain sleeps.
"""

from __future__ import annotations

import os
import signal
import socket
import time
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # mpi4py starts threads on import: see block_wake_signal
    from mpi4py import MPI

__all__ = ["Waker", "block_wake_signal"]

_SIGNAL = getattr(signal, "SIGURG", None)


def block_wake_signal() -> None:
    """Block the wake-up signal in the calling thread (call before MPI or torch start threads).

    Threads inherit the mask of the thread that creates them; a thread that
    does not block the signal would take it and drop it (default action:
    ignore), and the sleeper would wait for its timeout.
    """
    if _SIGNAL is not None and hasattr(signal, "pthread_sigmask"):
        signal.pthread_sigmask(signal.SIG_BLOCK, {_SIGNAL})


def _blocked_in_every_thread() -> bool:
    """True if every thread of this process blocks the signal (read from ``/proc``)."""
    bit = 1 << (int(_SIGNAL) - 1)
    try:
        for task in os.listdir("/proc/self/task"):
            with open(f"/proc/self/task/{task}/status") as fh:
                mask = next((int(line.split()[1], 16) for line in fh if line.startswith("SigBlk:")), 0)
            if not mask & bit:
                return False
    except (OSError, ValueError, StopIteration):
        return False
    return True


def _pid_namespace() -> int:
    try:
        return os.stat("/proc/self/ns/pid").st_ino
    except OSError:
        return -1


class Waker:
    """Sleep until woken by a peer on the same node, or until a timeout.

    Collective over ``comm`` at construction (one ``allgather``).

    Parameters
    ----------
    comm : mpi4py.MPI.Comm
    enabled : bool, default True
        False: :meth:`sleep` is ``time.sleep`` and :meth:`wake` does nothing.

    Notes
    -----
    Every thread of the process must block the signal, so call
    :func:`block_wake_signal` before importing mpi4py or torch (both start
    threads); if some thread does not block it, the Waker disables itself
    and :meth:`sleep` is a plain sleep.
    """

    def __init__(self, comm: MPI.Comm, enabled: bool = True) -> None:
        usable = bool(enabled) and _SIGNAL is not None and hasattr(signal, "sigtimedwait") \
            and hasattr(signal, "pthread_sigmask")
        if usable:
            block_wake_signal()
            usable = _blocked_in_every_thread()
        namespace = _pid_namespace() if usable else -1
        me = (socket.gethostname(), namespace, os.getpid(), usable and namespace != -1)
        peers = comm.allgather(me)
        self.enabled = me[3]
        self._pids = {rank: pid for rank, (host, ns, pid, ok) in enumerate(peers)
                      if ok and self.enabled and host == me[0] and ns == me[1] and rank != comm.rank}

    def can_wake(self, rank: int) -> bool:
        """True if ``rank`` is on this node and sleeps in :meth:`sleep`."""
        return rank in self._pids

    def wake(self, rank: int) -> None:
        """Wake ``rank`` if it sleeps in :meth:`sleep` (no-op for ranks elsewhere)."""
        pid = self._pids.get(rank)
        if pid is None:
            return
        try:
            os.kill(pid, _SIGNAL)
        except OSError:  # the peer has exited: nothing to wake
            self._pids.pop(rank, None)

    def sleep(self, seconds: float) -> None:
        """Sleep ``seconds`` at most; return early when a peer calls :meth:`wake`.

        Parameters
        ----------
        seconds : float
            Timeout in seconds (> 0).
        """
        if self.enabled:
            signal.sigtimedwait({_SIGNAL}, seconds)
        else:
            time.sleep(seconds)

"""Per-phase wall and CPU time of compressed collectives (``profile=`` argument)."""

from __future__ import annotations

import time

__all__ = ["PhaseProfile"]


class PhaseProfile:
    """Wall-clock and thread-CPU seconds accumulated per named phase.

    Pass one to :func:`hpcbench.collectives.compressed.icompressed_allreduce`
    (``profile=``) to split where a rank's time goes. Phases recorded:

    ``encode``
        error-feedback compensation, compression and the residual update
        (every kind but PowerSGD).
    ``decode``
        turning the received payloads into the result (for the sparse
        allgather: zeroing the output while the first block is on the wire,
        then the rank-ordered scatter-add).

    Everything else of the operation's wall time is the exchange: posting
    messages, waiting for the (modelled) wire, polling. CPU time is
    ``time.thread_time()`` of the calling thread: on an oversubscribed host
    ``wall - cpu`` of a compute phase is time spent waiting for a core.

    Attributes
    ----------
    wall, cpu : dict of str to float
        Seconds per phase.
    """

    __slots__ = ("wall", "cpu")

    def __init__(self) -> None:
        self.wall: dict[str, float] = {}
        self.cpu: dict[str, float] = {}

    @staticmethod
    def start() -> tuple[float, float]:
        """A ``(perf_counter, thread_time)`` stamp to pass to :meth:`stop`."""
        return time.perf_counter(), time.thread_time()

    def stop(self, phase: str, stamp: tuple[float, float]) -> None:
        """Add the wall and CPU seconds since ``stamp`` to ``phase``."""
        w, c = stamp
        self.wall[phase] = self.wall.get(phase, 0.0) + time.perf_counter() - w
        self.cpu[phase] = self.cpu.get(phase, 0.0) + time.thread_time() - c

    def reset(self) -> None:
        """Forget every phase."""
        self.wall.clear()
        self.cpu.clear()

    def __repr__(self) -> str:
        ph = ", ".join(f"{k}={1e3 * v:.1f}/{1e3 * self.cpu.get(k, 0.0):.1f}ms" for k, v in self.wall.items())
        return f"PhaseProfile(wall/cpu: {ph})"

"""Timing work that runs on an accelerator: never read the clock while the device is still computing.

CUDA kernels are launched asynchronously: a host clock read right after
``loss.backward()`` returns tells when the kernels were *queued*, not when
they ran. Two ways are used here, as PyTorch's own benchmarks do
(``torch.utils.benchmark`` synchronises; ``torch.cuda.Event(enable_timing=True)``
for intervals inside a stream):

* :meth:`DeviceClock.now` synchronises the device, then reads the host clock
  (the step boundaries of the training loop, whose intervals also hold host
  work such as MPI);
* :meth:`DeviceClock.mark` records a CUDA event in the current stream (no
  synchronisation), and :meth:`DeviceClock.seconds` turns two marks into
  seconds of device time once the device has passed them (the profiler's
  per-parameter and per-layer times, taken from hooks that must not stall
  the stream).

On the CPU both are the host clock and cost nothing more.
"""

from __future__ import annotations

import time
from typing import Any, Callable

__all__ = ["DeviceClock", "HOST"]


class DeviceClock:
    """A clock for one device.

    Parameters
    ----------
    device : hpcbench.runtime.device.Device or None
        The device whose work is timed (None or CPU: the host clock only).
    clock : callable, optional
        ``clock() -> float`` host seconds read after synchronising (default
        ``time.perf_counter``; the training runner passes its dilated clock).
    synchronize : callable, optional
        Waits for the device (default ``torch.cuda.synchronize(index)`` on a
        GPU, nothing on CPU); tests inject a recorder.
    """

    def __init__(self, device=None, clock: Callable[[], float] = time.perf_counter,
                 synchronize: Callable[[], None] | None = None) -> None:
        self.device = device
        self.cuda = bool(device is not None and device.is_cuda)
        self.clock = clock
        if synchronize is not None:
            self.synchronize = synchronize
        elif self.cuda:
            import torch

            index = device.index
            self.synchronize = lambda: torch.cuda.synchronize(index)
        else:
            self.synchronize = _nothing

    def now(self) -> float:
        """Host seconds after the device has finished everything queued so far."""
        self.synchronize()
        return self.clock()

    def mark(self) -> Any:
        """A point in the device's stream: a recorded ``torch.cuda.Event`` on a GPU, the host clock on CPU."""
        if not self.cuda:
            return time.perf_counter()
        import torch

        e = torch.cuda.Event(enable_timing=True)
        e.record()
        return e

    def seconds(self, start: Any, end: Any) -> float:
        """Seconds from mark ``start`` to mark ``end`` (on a GPU: waits for ``end`` first)."""
        if not self.cuda:
            return float(end - start)
        end.synchronize()
        return start.elapsed_time(end) / 1e3


def _nothing() -> None:
    return None


#: the host clock (CPU work)
HOST = DeviceClock()

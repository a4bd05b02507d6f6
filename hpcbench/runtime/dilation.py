"""Emulated compute and time dilation, for measuring scale beyond the cores at hand.

Running the real compute of 64 ranks on 2 cores measures time-slicing, not
the system. Two tools make such runs meaningful:

- **Emulated compute** (Sky Computing's method, Zhu et al. 2022, and
  FedScale's virtual device time): a rank does not run its forward/backward
  pass but sleeps for the time profiled from the real model (times a speed
  factor for a heterogeneous device). Sleeping ranks leave the cores to
  the ranks that really work (copying and reducing buffers).
- **Time dilation** (Gupta et al., "To Infinity and Beyond: Time-Warped
  Network Emulation", NSDI'06): every modelled duration (emulated compute,
  link latency and transfer time) is stretched by a factor ``d >= 1``, and
  every measured wall time is divided by ``d``. The CPU work that is real
  (memory copies, reductions, Python) then weighs ``d`` times less against
  modelled time, as if the machine were ``d`` times faster. With ``d = 1``
  nothing changes.

Every result file of a run that uses these records ``compute_mode`` and
``time_dilation``; runners print them in their header.
"""

from __future__ import annotations

import math
import time

__all__ = ["TimeDilation", "NO_DILATION"]


class TimeDilation:
    """A time-dilation factor, and sleeping and measuring under it.

    Parameters
    ----------
    factor : float, default 1.0
        ``d >= 1``: modelled durations last ``d`` times longer in wall time;
        measured wall durations are divided by ``d``.

    Raises
    ------
    ValueError
        ``factor`` is not a finite number >= 1.

    Examples
    --------
    >>> td = TimeDilation(10.0)
    >>> td.to_wall(0.002)   # a 2 ms modelled compute step sleeps 20 ms
    0.02
    >>> td.to_model(0.05)   # 50 ms of wall time is 5 ms of modelled time
    0.005
    """

    __slots__ = ("factor",)

    def __init__(self, factor: float = 1.0) -> None:
        factor = float(factor)
        if not (math.isfinite(factor) and factor >= 1.0):
            raise ValueError(f"time dilation factor must be a finite number >= 1, got {factor!r}")
        self.factor = factor

    def to_wall(self, modelled_s: float) -> float:
        """Wall seconds that ``modelled_s`` seconds of modelled time last."""
        return modelled_s * self.factor

    def to_model(self, wall_s: float) -> float:
        """Modelled seconds that ``wall_s`` measured wall seconds stand for."""
        return wall_s / self.factor

    def now(self) -> float:
        """Modelled time now: ``time.perf_counter() / factor`` (differences only are meaningful)."""
        return time.perf_counter() / self.factor

    def sleep(self, modelled_s: float) -> None:
        """Emulate ``modelled_s`` seconds of work (compute on a device) by sleeping, dilated.

        The sleep is exact to the OS timer (sub-millisecond on Linux); the
        process uses no CPU meanwhile.
        """
        if modelled_s > 0:
            time.sleep(modelled_s * self.factor)

    def __repr__(self) -> str:
        return f"TimeDilation({self.factor:g})"


#: Real time: modelled and wall time are the same.
NO_DILATION = TimeDilation(1.0)

"""Predicted iteration time of an allocation under a schedule (discrete-event simulation).

Resources (each serves one thing at a time, in the order the schedule issues
work): every stage's device, every stage's forward link (activations to the
next stage) and every stage's backward link (gradients to the previous one).
A message departs when its link is free, occupies it for ``bytes *
link_s_per_byte`` and arrives ``link_latency_s`` after it left the link.
An action starts when its stage is free and its input has arrived (``B`` of
the last stage needs only its own ``F``). This is the model the pipeline
runner's emulated mode executes, so measured and predicted iteration times
differ only by the runner's own overheads.

For ``p`` equal stages of time ``t = f + b``, no communication and GPipe,
the result is ``(m + p - 1) t``: the bubble fraction ``(p - 1)/(m + p - 1)``.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from hpcbench.allocation.instance import Allocation, Instance
from hpcbench.allocation.schedules import SCHEDULES

__all__ = ["simulate", "Timeline"]


@dataclasses.dataclass
class Timeline:
    """Simulated timing of one iteration.

    Attributes
    ----------
    iteration_s : float
        Time from the first action's start to the last action's end, seconds.
    start_s, end_s : numpy.ndarray of float64, shape (D, 2, m)
        Start and end of each stage's ``F`` (index 0) and ``B`` (index 1) of each micro-batch.
    busy_s : numpy.ndarray of float64, shape (D,)
        Compute time of each stage in the iteration.
    """

    iteration_s: float
    start_s: np.ndarray
    end_s: np.ndarray
    busy_s: np.ndarray

    @property
    def bubble_fraction(self) -> float:
        """Idle share of the stages' time: ``1 - sum(busy) / (D * iteration)``."""
        return float(1.0 - self.busy_s.sum() / (self.busy_s.size * self.iteration_s))


def simulate(inst: Instance, alloc: Allocation, schedule: str = "gpipe") -> Timeline:
    """Simulate one iteration of ``alloc`` on ``inst`` with the named schedule.

    Parameters
    ----------
    inst : Instance
    alloc : Allocation
    schedule : {"gpipe", "1f1b"}

    Returns
    -------
    Timeline

    Raises
    ------
    KeyError
        Unknown schedule name.
    """
    p, m = inst.num_devices, inst.micro_batches
    t = inst.stage_times_s(alloc)
    dur = np.stack([t * inst.forward_fraction, t * (1.0 - inst.forward_fraction)], axis=1)  # (p, 2)
    lf, lb = inst.link_times_s(alloc)
    lat = inst.link_latency_s
    plans = [SCHEDULES[schedule](k, p, m) for k in range(p)]
    nxt = [0] * p
    free = np.zeros(p)
    link_f = np.zeros(p)
    link_b = np.zeros(p)
    arrive = np.full((p, 2, m), np.nan)   # arrival at stage k of its F input / B input
    arrive[0, 0, :] = 0.0
    start = np.full((p, 2, m), np.nan)
    end = np.full((p, 2, m), np.nan)
    remaining = p * 2 * m
    while remaining:
        progressed = False
        for k in range(p):
            while nxt[k] < len(plans[k]):
                kind, i = plans[k][nxt[k]]
                d = 0 if kind == "F" else 1
                if d == 1 and k == p - 1:
                    ready = end[k, 0, i]
                else:
                    ready = arrive[k, d, i]
                if np.isnan(ready):
                    break
                s = max(free[k], ready)
                e = s + dur[k, d]
                start[k, d, i], end[k, d, i] = s, e
                free[k] = e
                if d == 0 and k < p - 1:
                    dep = max(e, link_f[k])
                    link_f[k] = dep + lf[k]
                    arrive[k + 1, 0, i] = link_f[k] + lat
                elif d == 1 and k > 0:
                    dep = max(e, link_b[k])
                    link_b[k] = dep + lb[k - 1]
                    arrive[k - 1, 1, i] = link_b[k] + lat
                nxt[k] += 1
                remaining -= 1
                progressed = True
        if not progressed:  # pragma: no cover - a schedule from SCHEDULES never deadlocks
            raise RuntimeError(f"schedule {schedule!r} deadlocked in simulation")
    return Timeline(float(np.nanmax(end)), start, end, dur.sum(axis=1) * m)

"""Failures on purpose (tests only): ``--fault-inject RANK:STEP:MODE`` and the points where it fires.

The job lifecycle (:mod:`hpcbench.lifecycle`) parses the hidden flag into a
:class:`FaultSpec` and arms it (:func:`arm`); a runner calls
:func:`fault_point` once per unit of work (round, iteration, size), and on
rank RANK at step STEP it raises ``RuntimeError`` (MODE ``raise``), an
``InputError`` (MODE ``input``), or leaves at once with ``os._exit(1)``
(MODE ``exit``: no handler runs, as after a native crash).
"""

from __future__ import annotations

import os
import sys

from hpcbench.runtime.errors import EXIT_FAILURE, InputError

__all__ = ["FaultSpec", "arm", "fault_point"]


class FaultSpec:
    """A parsed ``--fault-inject RANK:STEP:MODE`` for a job of ``world_size`` ranks.

    Raises
    ------
    InputError
        The spec is malformed, MODE is unknown, RANK is not a rank of the job
        or STEP is below 1; the message names ``--fault-inject``.
    """

    def __init__(self, spec: str, world_size: int):
        try:
            rank, step, mode = spec.split(":")
            self.rank, self.step, self.mode = int(rank), int(step), mode
        except ValueError:
            raise InputError(f"--fault-inject: expected RANK:STEP:MODE, got {spec!r}") from None
        if self.mode not in ("raise", "input", "exit"):
            raise InputError(f"--fault-inject: MODE must be 'raise', 'input' or 'exit', got {self.mode!r}")
        if not 0 <= self.rank < world_size:
            raise InputError(f"--fault-inject: RANK {self.rank} is not a rank of this job (0..{world_size - 1})")
        if self.step < 1:
            raise InputError(f"--fault-inject: STEP {self.step} must be >= 1 (steps count from 1)")

    def check_steps(self, steps: int | None) -> None:
        """Refuse a STEP beyond the job's ``steps`` (None: the job does not know its steps).

        Raises
        ------
        InputError
            STEP is larger than ``steps``.
        """
        if steps is not None and self.step > steps:
            raise InputError(f"--fault-inject: STEP {self.step} is beyond the {steps} steps of this job")


_FAULT: FaultSpec | None = None
_RANK = 0


def arm(fault: FaultSpec | None, rank: int) -> None:
    """Make ``fault`` (None: no fault) the one :func:`fault_point` fires, on this process's ``rank``."""
    global _FAULT, _RANK
    _FAULT, _RANK = fault, rank


def fault_point(step: int) -> None:
    """Where a runner may fail on purpose (``--fault-inject``; tests only).

    Call it once per unit of work (round, iteration, size) with a step
    number that counts from 1. It does nothing unless this rank and step
    match the fault spec.

    Raises
    ------
    RuntimeError
        When the fault's mode is ``raise``.
    InputError
        When the fault's mode is ``input``.
    """
    if _FAULT is None or _FAULT.rank != _RANK or _FAULT.step != step:
        return
    if _FAULT.mode == "exit":
        sys.stderr.write(f"fault injected on rank {_RANK} at step {step}: os._exit({EXIT_FAILURE})\n")
        sys.stderr.flush()
        os._exit(EXIT_FAILURE)
    if _FAULT.mode == "input":
        raise InputError(f"fault injected on rank {_RANK} at step {step} (as an input error)")
    raise RuntimeError(f"fault injected on rank {_RANK} at step {step}")

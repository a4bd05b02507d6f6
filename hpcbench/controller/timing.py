"""When the controller decides and when a decision takes effect: StellaTrain's constants, as data.

Source: ``backend/src/engine/batch_rate_alloc_optim.py``, lines 14-18
(``GPU_INIT_WARMUP_THRESH = 4``, ``GPU_POINT_RELIABLE_THRESH = 4``,
``EFFECTIVE_AFTER_ITER = 3``, ``WAIT_EFFECT_ITER = 4``,
``WAIT_EFFECT_ITER_MAIN = 5``), line 297 (``main_iter % 100 == 0``: the batch
sizes are re-optimised at every 100th decision of the running phase, not
every 100th step; other decisions reuse them), lines 40, 444 (throughput
history momentum 0.9, 0.999 once running) and 449 (batch growth x1.5 while
collecting throughput points).
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["DecisionTiming", "STELLATRAIN_TIMING", "DecisionClock"]


@dataclass(frozen=True)
class DecisionTiming:
    """The controller's timing constants.

    Attributes
    ----------
    effective_after : int
        A decision applies from the most advanced worker's step plus this (3).
    wait_steps : int
        Before the running phase: no new decision until the slowest worker
        is this many steps past the last decision's first step (4).
    wait_steps_running : int
        The same in the running phase (5).
    warmup_records : int
        A worker's first records not used for its throughput fit (4).
    reliable_samples : int
        Samples a worker's history needs before it is fitted (4); also the
        samples every worker needs to end the warm-up.
    reoptimise_every : int
        Decisions of the running phase between two batch-size optimisations (100).
    history_momentum, history_momentum_running : float
        Smoothing of each batch size's throughput (0.9; 0.999 once running).
    growth : float
        Batch growth per decision while collecting throughput points (1.5).
    """

    effective_after: int = 3
    wait_steps: int = 4
    wait_steps_running: int = 5
    warmup_records: int = 4
    reliable_samples: int = 4
    reoptimise_every: int = 100
    history_momentum: float = 0.9
    history_momentum_running: float = 0.999
    growth: float = 1.5


#: StellaTrain's values
STELLATRAIN_TIMING = DecisionTiming()


class DecisionClock:
    """Which step a decision may be taken at, and which step it takes effect at.

    Parameters
    ----------
    timing : DecisionTiming
    first_effective : int, default 0
        First step of the configuration in force at the start (StellaTrain
        records the initial configuration as a decision effective at 0).
    """

    def __init__(self, timing: DecisionTiming = STELLATRAIN_TIMING, first_effective: int = 0) -> None:
        self.timing = timing
        self.last_effective = first_effective

    def due(self, slowest_step: int, running: bool) -> bool:
        """Whether the slowest worker is far enough past the last decision's first step."""
        wait = self.timing.wait_steps_running if running else self.timing.wait_steps
        return slowest_step >= self.last_effective + wait

    def schedule(self, latest_step: int) -> int:
        """The first step of a decision taken now (``latest_step + effective_after``); remembered."""
        self.last_effective = latest_step + self.timing.effective_after
        return self.last_effective

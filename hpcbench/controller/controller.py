"""StellaTrain's controller, without MPI: telemetry in, decisions (batch sizes, compression rate) out.

Follows ``MainOptimizer`` (``backend/src/engine/batch_rate_alloc_optim.py``)
driven by ``BatchSizeRateAlloc`` (``batch_rate_alloc.py``), phase by phase:

1. **warm-up**: every worker's records after its first ``warmup_records``
   go into its throughput history; once every history holds
   ``reliable_samples``, collecting starts (lines 386-399);
2. **collect**: each decision grows every batch size by ``growth`` (x1.5)
   up to its bound, at the initial compression rate, to measure throughput
   at several sizes; when every worker is at its bound, running starts
   (``step_init_collect_x``, lines 429-452);
3. **running**: each decision updates the bandwidth estimate, re-optimises
   the batch sizes every ``reoptimise_every`` decisions, and searches the
   compression rate for the estimate (``step_main``, lines 203-343).

Decisions are taken when :class:`~hpcbench.controller.timing.DecisionClock`
says so and take effect ``effective_after`` steps after the most advanced
worker (``step``, lines 454-479). Every worker's throughput model is
refitted after each observation with enough samples (lines 345-361, 404-427).

The caller (a training policy) gathers one step's records from every rank
to one place, calls :meth:`Controller.observe`, and applies a returned
:class:`Decision` on every rank from its ``effective_step``. StellaTrain's
public engine never starts its telemetry client or controller; here they are
meant to be connected.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Sequence

import numpy as np

from hpcbench.controller.bandwidth import BandwidthEstimator
from hpcbench.controller.batch import BatchProblem, solve_batch_sizes
from hpcbench.controller.rate import WireModel, modelled_step_s, search_compression_rate
from hpcbench.controller.throughput import INITIAL_MODEL, ThroughputHistory, ThroughputModel, fit_throughput
from hpcbench.controller.timing import STELLATRAIN_TIMING, DecisionClock, DecisionTiming
from hpcbench.telemetry.record import TelemetryRecord, unit_field

__all__ = ["Controller", "Decision", "PHASES"]

PHASES = ("warmup", "collect", "running")


@dataclass(frozen=True)
class Decision:
    """One controller decision (one row of the ``controller`` table; the ``decisions`` table records every
    policy's decisions as the step loop applied them).

    Attributes
    ----------
    step : int
        The slowest worker's step when it was decided.
    effective_step : int
        First step it applies to, on every rank.
    phase : str
        ``collect`` or ``running``.
    measured_bps, estimate_bps : float
        Measured (the estimator's minimum over workers of their receive
        throughput) and estimated bandwidth, bit/s (NaN while collecting).
    reduce_fraction : float
        The estimator's ``r`` (NaN while collecting, and with an estimator
        that does not use it).
    compression_rate : float
        Fraction of gradient elements dropped (StellaTrain's rate).
    ratio : float
        Fraction kept: ``1 - compression_rate``.
    batch_sizes : str
        Batch size per worker, comma-separated, rank order.
    objective : float
        Batch objective of ``batch_sizes`` (NaN while collecting).
    reoptimised : bool
        Whether the batch sizes were optimised at this decision.
    """

    step: int = unit_field("1", "slowest worker's step when decided")
    effective_step: int = unit_field("1", "first step the decision applies to")
    phase: str = unit_field("", "collect (growing batches to fit throughput) or running")
    measured_bps: float = unit_field("bit/s", "minimum over workers of the (smoothed) receive throughput")
    estimate_bps: float = unit_field("bit/s", "bandwidth estimate the rate was chosen for")
    reduce_fraction: float = unit_field("1", "min wait / (min wait + mean compute); 0 below 0.05")
    compression_rate: float = unit_field("1", "fraction of gradient elements dropped")
    ratio: float = unit_field("1", "fraction of gradient elements kept (1 - compression_rate)")
    batch_sizes: str = unit_field("", "batch size per worker, comma-separated, rank order")
    objective: float = unit_field("1", "batch objective: slowest s/sample + 5 CV(times)")
    reoptimised: bool = unit_field("1", "batch sizes optimised at this decision")

    @property
    def batches(self) -> tuple[int, ...]:
        """Batch size per worker."""
        return tuple(int(v) for v in self.batch_sizes.split(","))


class Controller:
    """Batch sizes and compression rate from telemetry (StellaTrain's ``MainOptimizer``, no learned penalty).

    Parameters
    ----------
    wire : WireModel
        The bytes a worker sends per step as a function of the rate.
    upper : sequence of int
        Largest batch size of each worker (StellaTrain: per GPU model); its
        length is the number of workers.
    initial_batch : sequence of int
        Batch sizes in force at the start.
    initial_rate : float
        Compression rate (fraction dropped) in force at the start.
    lower : int or sequence of int, default 1
    solver : str, default "exact"
        A key of :data:`hpcbench.controller.batch.BATCH_SOLVERS`.
    timing : DecisionTiming, default STELLATRAIN_TIMING
    estimator : BandwidthEstimator or DeliveredBandwidthEstimator, optional
        An entry of :data:`hpcbench.controller.estimators.ESTIMATORS`.
        Default: StellaTrain's (:class:`BandwidthEstimator`, its constants,
        peak meter readings).
    seed : int
        Seed of ``nelder-mead``'s random starts.
    restarts : int
        Random starts of ``nelder-mead`` at the first optimisation (32).

    Attributes
    ----------
    models : list of ThroughputModel
        Current fit per worker.
    decisions : list of Decision
    phase : str
    """

    def __init__(self, wire: WireModel, upper: Sequence[int], initial_batch: Sequence[int], initial_rate: float,
                 lower: int | Sequence[int] = 1, solver: str = "exact",
                 timing: DecisionTiming = STELLATRAIN_TIMING, estimator=None,
                 seed: int = 0, restarts: int = 32) -> None:
        self.n = len(upper)
        self.wire, self.solver, self.timing, self.seed, self.restarts = wire, solver, timing, seed, restarts
        self.upper = np.asarray(upper, dtype=np.int64)
        self.lower = np.broadcast_to(np.asarray(lower, dtype=np.int64), (self.n,)).copy()
        BatchProblem.of([INITIAL_MODEL] * self.n, self.lower, self.upper)      # validates the bounds
        self.batch = np.asarray(initial_batch, dtype=np.int64)
        self.rate = float(initial_rate)
        self.estimator = estimator or BandwidthEstimator()
        self.models: list[ThroughputModel] = [INITIAL_MODEL] * self.n
        self.histories = [ThroughputHistory(timing.history_momentum) for _ in range(self.n)]
        self._records = np.zeros(self.n, dtype=np.int64)
        self._steps = np.full(self.n, -1, dtype=np.int64)
        self.clock = DecisionClock(timing)
        self.phase = "warmup"
        self.decisions: list[Decision] = []
        self._main_iter = 0
        self._objective = float("nan")
        self._prev_estimate: float | None = None

    def observe(self, records: Iterable[TelemetryRecord]) -> Decision | None:
        """Take records (any ranks, usually one step's from every rank); a new decision, or None.

        Raises
        ------
        ValueError
            A record's rank is outside ``[0, n)``.
        """
        records = list(records)
        t = self.timing
        for rec in records:
            if not 0 <= rec.rank < self.n:
                raise ValueError(f"record of rank {rec.rank}, the controller has {self.n} workers")
            if self._records[rec.rank] >= t.warmup_records:
                self.histories[rec.rank].add(rec.micro_batch * rec.grad_accumulation, rec.backward_s)
            self._records[rec.rank] += 1
            self._steps[rec.rank] = max(self._steps[rec.rank], rec.step)
        self.estimator.observe(records)
        for i, h in enumerate(self.histories):
            if h.samples >= t.reliable_samples:
                x, y = h.points()
                self.models[i] = fit_throughput(x, y, self.models[i])
        if self.phase == "warmup":
            if all(h.samples >= t.reliable_samples for h in self.histories):
                self.phase = "collect"
            else:
                return None
        slowest, latest = int(self._steps.min()), int(self._steps.max())
        if slowest < 0 or not self.clock.due(slowest, self.phase == "running"):
            return None
        if self.phase == "collect" and np.all(self.batch == self.upper):
            self.phase = "running"
            for h in self.histories:
                h.momentum = t.history_momentum_running
        decision = self._collect(slowest, latest) if self.phase == "collect" else self._running(slowest, latest)
        self.decisions.append(decision)
        return decision

    def _collect(self, slowest: int, latest: int) -> Decision:
        self.batch = np.minimum(np.round(self.batch * self.timing.growth), self.upper).astype(np.int64)
        nan = float("nan")
        return Decision(slowest, self.clock.schedule(latest), "collect", nan, nan, nan, self.rate, 1.0 - self.rate,
                        ",".join(map(str, self.batch.tolist())), nan, False)

    def _running(self, slowest: int, latest: int) -> Decision:
        est = self.estimator.estimate()
        reopt = self._main_iter % self.timing.reoptimise_every == 0
        if reopt:
            problem = BatchProblem.of(self.models, self.lower, self.upper)
            starts = ()
            if self._main_iter and self._prev_estimate is not None:
                scale = float(np.clip(self._prev_estimate / max(est.estimate_bps, 1e-3), 0.1, 16))
                starts = (self.batch * scale, self.batch * scale * 2)
            alloc = solve_batch_sizes(problem, self.solver, self.seed + self._main_iter,
                                      self.restarts if self._main_iter == 0 else 0, starts)
            self.batch = np.asarray(alloc.batch, dtype=np.int64)
            self._objective = alloc.objective
        self._main_iter += 1
        self._prev_estimate = est.estimate_bps
        step_s = modelled_step_s(self.models, self.batch.tolist())
        rate = search_compression_rate(self.wire, est.estimate_bps, step_s, self.n)
        self.rate = rate.compression_rate
        return Decision(slowest, self.clock.schedule(latest), "running", est.measured_bps, est.estimate_bps,
                        est.reduce_fraction, rate.compression_rate, rate.ratio,
                        ",".join(map(str, self.batch.tolist())), self._objective, reopt)

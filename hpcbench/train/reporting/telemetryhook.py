"""Per-step, per-rank telemetry of the training runner (StellaTrain's), its ``telemetry`` table and Chrome trace.

With ``telemetry: true`` (or a policy that reads it, ``needs_telemetry``)
every rank meters its transport's traffic (:class:`hpcbench.telemetry.TrafficMeters`:
send and receive, busiest 100 ms bin and mean of the last 1 s) and, after
each step, the step loop asks :meth:`TelemetryHook.measure` for the rank's
:class:`~hpcbench.telemetry.TelemetryRecord`; its numbers travel with the
step's own in the loop's one gather (or allgather), so every rank's records
reach rank 0 (every rank, for a policy that needs all ranks) without another
exchange, and :meth:`hpcbench.policies.telemetry.Telemetry.records` gives
them to the policies. Rank 0 appends them to the ``telemetry`` table, with
the modelled link's true mean bandwidth over its step (``link_bps``, what
the controller's estimate is judged against).

What hpcbench's step measures, against StellaTrain's fields
(``backend/src/proto/message.proto``):

- ``forward_s``, ``backward_s``: the step's forward and backward compute
  (emulated: as replayed);
- ``bwd_fwd_gap_s``: the wait after backward for the gradients' exchange
  (the step's ``exposed_s``; StellaTrain's next forward waits for the same
  thing, its optimizer runs on other CPU threads, so the optimizer's
  compute is left out here as well);
- ``intra_fwd_gap_s``: the forward's wait for parameters still being
  reduced (``schedule: priority``; 0 under FIFO);
- ``recv_busy_bps``: the bytes of every transfer this rank received in
  the step (all buckets) over their own seconds on the wire (not in
  StellaTrain; what :class:`hpcbench.controller.DeliveredBandwidthEstimator`
  reads);
- ``micro_batch``: this worker's batch; ``grad_accumulation``: 1 (the runner
  does not accumulate); ``ratio``: the active synchroniser's kept
  fraction (``Synchroniser.ratio``).

The Chrome trace (``chrome_trace: true | PATH``; :mod:`hpcbench.results.chrome_trace`)
gets, per rank and step, the forward and backward on the ``compute`` track,
each bucket's reduction from its start to its completion on
``communication``, the optimizer step on ``optimizer``, and the meters'
readings as counters. The compressed synchroniser compresses inside its
collective's progress (the ``compression`` track stays empty here).
"""

from __future__ import annotations

import time

import numpy as np

from hpcbench.train.steps.hooks import Hook

__all__ = ["TelemetryHook", "telemetry_columns"]


def telemetry_columns():
    """The ``telemetry`` table's columns: the entry (``sync``), then :class:`~hpcbench.telemetry.TelemetryRecord`'s."""
    from hpcbench.results import Column
    from hpcbench.results.records import columns_of
    from hpcbench.telemetry import TelemetryRecord

    return [Column("sync", "str", "", "the entry whose run it measured"), *columns_of(TelemetryRecord),
            Column("link_bps", "float64", "bit/s", "the modelled link's mean bandwidth over rank 0's step (its "
                                                   "trace's, the truth the controller estimates; NaN: no model)")]


class TelemetryHook(Hook):
    """Meters, measures and records each step's telemetry (see the module docstring); one per job, every rank.

    Parameters
    ----------
    table : hpcbench.results.writer.Table or None
        Rank 0: the ``telemetry`` table; None elsewhere.
    recorder : hpcbench.results.chrome_trace.TraceRecorder or None
        This rank's trace (None: no trace).
    """

    def __init__(self, table=None, recorder=None) -> None:
        self.table, self.recorder = table, recorder
        self.meters = None
        self._origin = 0.0
        self._link_bps = float("nan")
        self._spent = 0.0       # wall seconds in measure and after_step since take_spent

    def take_spent(self) -> float:
        """Wall seconds this hook spent in :meth:`measure` and :meth:`after_step` since the last call."""
        spent, self._spent = self._spent, 0.0
        return spent

    def before_train(self, ctx) -> None:
        from hpcbench.telemetry import TrafficMeters

        setup = ctx.setup
        self.meters = TrafficMeters(setup.dilation)
        setup.transport.meter = self.meters
        self._origin = setup.dilation.now()

    def after_train(self, ctx) -> None:
        ctx.setup.transport.meter = None

    def measure(self, ctx, rec) -> np.ndarray:
        """This rank's :class:`~hpcbench.telemetry.TelemetryRecord` of the step just run, as its vector.

        Parameters
        ----------
        ctx : hpcbench.train.steps.context.TrainContext
        rec : hpcbench.train.steps.steprecord.StepRecord
            The step's record (its ``start_s``, ``forward_s``, ... on the run's clock).
        """
        t0 = time.perf_counter()
        try:
            return self._measure(ctx, rec)
        finally:
            self._spent += time.perf_counter() - t0

    def _measure(self, ctx, rec) -> np.ndarray:
        from hpcbench.telemetry import TelemetryRecord

        setup = ctx.setup
        now = setup.dilation.now()
        link_rate = getattr(setup.transport, "link_rate", None)
        if link_rate is not None and rec.start_s == rec.start_s:
            end = time.monotonic()
            self._link_bps = link_rate(end - setup.dilation.to_wall(now - rec.start_s), end)
        send_peak, send_mean, recv_peak, recv_mean = self.meters.readings(now)
        gap = rec.exposed_s if rec.intra_fwd_gap_s == 0 else 0.0
        out = TelemetryRecord(
            step=ctx.info.step, rank=ctx.state.rank, time_s=now - self._origin, forward_s=rec.forward_s,
            backward_s=rec.backward_s, bwd_fwd_gap_s=gap if gap == gap else 0.0,
            intra_fwd_gap_s=rec.intra_fwd_gap_s, send_peak_bps=send_peak, send_mean_bps=send_mean,
            recv_peak_bps=recv_peak, recv_mean_bps=recv_mean, micro_batch=ctx.state.local, grad_accumulation=1,
            ratio=float(ctx.sync.ratio), recv_busy_bps=self.meters.delivered_bps())
        if self.recorder is not None:
            self._trace(ctx, rec, now, recv_peak, recv_mean)
        return out.vector()

    def _trace(self, ctx, rec, now: float, recv_peak: float, recv_mean: float) -> None:
        r, t, step = self.recorder, rec.start_s, ctx.info.step
        if not (t == t and rec.forward_s == rec.forward_s):
            return
        fwd_end = t + rec.forward_s + rec.intra_fwd_gap_s
        r.span("compute", "forward", t, fwd_end, step=step, batch=ctx.state.local)
        if rec.backward_s == rec.backward_s:
            r.span("compute", "backward", fwd_end, fwd_end + rec.backward_s, step=step)
        if rec.optimizer_s == rec.optimizer_s and rec.optimizer_s > 0:
            end = t + rec.step_s
            r.span("optimizer", "optimizer", end - rec.optimizer_s, end, step=step)
        buckets = getattr(ctx.worker, "buckets", None)
        if buckets is not None:
            times = buckets.times
            for b, (s, e) in enumerate(zip(times.started, times.completed)):
                if s == s and e == e and e >= s:
                    r.span("communication", f"bucket {b}", float(s), float(e), step=step)
        r.counter("receive throughput", now, peak_bps=recv_peak, mean_bps=recv_mean)

    def after_step(self, ctx, telemetry) -> None:
        """Rank 0: every rank's records of the step into the ``telemetry`` table."""
        if self.table is None:
            return
        t0 = time.perf_counter()
        try:
            self._rows(ctx, telemetry)
        finally:
            self._spent += time.perf_counter() - t0

    def _rows(self, ctx, telemetry) -> None:
        recs = telemetry.records()
        if not recs:
            return
        rows = {k: [getattr(x, k) for x in recs] for k in recs[0].names()}
        rows["sync"] = [ctx.label] * len(recs)
        rows["link_bps"] = [self._link_bps] * len(recs)
        self.table.append(rows)

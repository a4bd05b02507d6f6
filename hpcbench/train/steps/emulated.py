"""An emulated worker (``compute: emulated``): the profiled compute timeline, replayed, around real communication.

Each step sleeps the forward time, releases each real-sized gradient bucket
at the moment the profiled backward produced it (so the synchroniser starts
it then, as with the real model), sleeps the rest of backward, waits for the
buckets, and sleeps the optimizer time. Model-averaging synchronisers get a
model-sized buffer at the start of the step instead. The buffers are numpy
float32 arrays (their content is irrelevant: what is measured is how long the
real bytes take), and nothing here imports torch, so a rank costs its
buffers plus the interpreter, numpy and mpi4py: about 136 MB for ResNet-50's
102 MB of gradients, against about 300 MB with torch's own private memory.

Under ``schedule: priority`` (:mod:`hpcbench.train.synchronisation.priority`) the forward
is replayed in pieces: before the piece that first uses a bucket's
parameters it waits for that bucket of the previous step and sleeps its share
of the optimizer time; backward releases the buckets to an ordered allreduce
and the step ends with backward, without waiting.

A batch size other than the profiled one (set by a policy at run time)
replays the profile at that batch (:meth:`hpcbench.train.steps.profile.ComputeProfile.at_batch`:
forward and backward in proportion to the batch, the optimizer unchanged).

Times are read on the run's clock (modelled seconds); the fields are those of
:class:`hpcbench.train.steps.steprecord.StepRecord`.
"""

from __future__ import annotations

import math

import numpy as np

from hpcbench.train.synchronisation.buckets import BucketPlan, GradientBuckets
from hpcbench.train.steps.steprecord import StepRecord

__all__ = ["EmulatedWorker"]

#: longest single sleep (modelled seconds) of an emulated wait while buckets are open, so that
#: synchronisers progressed by polling (``compressed``) keep moving
_POLL_S = 2e-3


class EmulatedWorker:
    """One rank's emulated replica: its synchroniser, real-sized buffers and the compute timeline.

    Parameters
    ----------
    sync : hpcbench.sync.Synchroniser
        Averaging ``"gradients"`` or ``"models"`` (wrapped ones need the real model).
    profile : hpcbench.train.steps.profile.ComputeProfile
        Parameter sizes and the timeline a step replays (modelled seconds).
    state : hpcbench.train.steps.context.BatchState
        The run's batch sizes (this worker's is read at each step).
    profile_batch : int
        The batch size ``profile`` was measured (or given) at.
    bucket_bytes : int
    overlap : bool
        Start each bucket when the profiled backward completes it (False: all after backward).
    dilation : hpcbench.runtime.dilation.TimeDilation
    order : sequence of int, optional
        ``schedule: priority``: the buckets' start order
        (:func:`hpcbench.train.synchronisation.priority.priority_order`); None: FIFO.
    """

    model = None

    def __init__(self, sync, profile, state, profile_batch: int, bucket_bytes: int, overlap: bool, dilation,
                 order=None) -> None:
        self.sync, self.base_profile, self.state, self.profile_batch = sync, profile, state, profile_batch
        self.profile = profile
        self.dilation, self.clock = dilation, dilation.now
        self.plan = BucketPlan(profile.numels, bucket_bytes)
        self.buckets = None
        self.order = order if sync.averages == "gradients" else None
        if sync.averages == "gradients":
            self.buckets = GradientBuckets(self.plan, sync, self.clock, fill=1.0, overlap=overlap, order=self.order)
        else:
            self.model_buffer = np.zeros(int(sum(profile.numels)), dtype=np.float32)
        self._handle, self._done = None, math.nan
        if self.order is not None:
            self.update_s = profile.optimizer_s * self.plan.numel / max(int(self.plan.numel.sum()), 1)
            self._pending = False
        self._at_batch(profile_batch)

    def _at_batch(self, batch: int) -> None:
        """Replay the profile at ``batch`` samples from now on."""
        self._batch = batch
        self.profile = self.base_profile.at_batch(batch / self.profile_batch)
        if self.order is not None:
            from hpcbench.train.synchronisation.priority import bucket_need_times

            self.need = bucket_need_times(self.plan, self.profile.need_times())

    def close(self) -> None:
        """Nothing to remove (no hooks); the synchroniser is closed by its owner. What the last step left in
        flight is not waited for (after a failure it may never complete): :meth:`flush` first on a normal end."""

    def set_learning_rate(self, lr: float) -> None:
        """Nothing to change: the emulated replica has no optimizer (its step time does not depend on it)."""

    def settle(self) -> None:
        """As :meth:`flush` (the emulated replica has no model to read)."""
        self.flush()

    def flush(self) -> None:
        """``schedule: priority``: wait for the last step's buckets (their updates are the next forward's)."""
        if self.order is not None and self._pending:
            self.buckets.finish()       # every bucket is already released: this only waits
            self._pending = False

    def _poll(self) -> None:
        if self.buckets is not None:
            self.buckets.poll()
        elif self._handle is not None and self._done != self._done and self.sync.test(self._handle):
            self._done = self.clock()

    def _sleep_until(self, target: float, polling: bool) -> None:
        while True:
            left = target - self.clock()
            if left <= 0:
                return
            self.dilation.sleep(min(left, _POLL_S) if polling else left)
            if polling:
                self._poll()

    def step(self, t: int, batch=None, monitors=()) -> StepRecord:
        """Replay one step at this worker's batch size (``state.local``).

        Parameters
        ----------
        t : int
            Step number; a model-averaging synchroniser gets it as the
            buffer index of ``sync.start``.
        batch : None
            No inputs: the compute is replayed.
        monitors : sequence, optional
            Ignored (monitors need real gradients).

        Returns
        -------
        StepRecord
            ``compute_s``, ``comm_span_s``, ``exposed_s`` and ``step_s`` in
            modelled seconds (the run's clock); ``loss`` and
            ``local_sq_norm`` stay NaN and ``monitor_s`` 0.
        """
        if self.state.local != self._batch:
            self._at_batch(self.state.local)
        if self.order is not None:
            return self._priority_step()
        p, rec = self.profile, StepRecord()
        t0 = self.clock()
        if self.buckets is None:
            self._sleep_until(t0 + p.copy_s, False)     # the real worker copies the model into its send buffer
            self._handle, self._done = self.sync.start(self.model_buffer, t), math.nan
            ts = self.clock()
            self._sleep_until(ts + p.forward_s, True)
            tb = self.clock()
            self._sleep_until(ts + p.forward_s + p.backward_s, True)
            t1 = self.clock()
            self._poll()
            self.sync.wait(self._handle)
            rec.comm_span_s = (self._done if self._done == self._done else self.clock()) - t0
            self._handle = None
            t2 = self.clock()
        else:
            b = self.buckets
            b.begin(want_norm=False)
            self._sleep_until(t0 + p.forward_s, False)
            tb = self.clock()
            for i, r in enumerate(self.plan.ready_times(p.param_ready_s)):
                self._sleep_until(tb + r, True)
                b.mark_ready(i)
            self._sleep_until(tb + p.backward_s, True)
            t1 = self.clock()
            b.finish()
            t2 = self.clock()
            rec.comm_span_s = b.times.span()
        self._sleep_until(t2 + self.sync.mix_memory_s(p) + p.optimizer_s, False)
        t4 = self.clock()
        rec.compute_s, rec.exposed_s, rec.step_s = (t1 - t0) + (t4 - t2), t2 - t1, t4 - t0
        rec.start_s, rec.forward_s, rec.backward_s, rec.optimizer_s = t0, tb - t0, t1 - tb, t4 - t2
        return rec

    def _priority_step(self) -> StepRecord:
        """Forward in pieces (waiting for, and updating, each bucket of the last step before its first use),
        then backward releasing this step's buckets in their order; ``exposed_s`` is the forward's waiting."""
        p, rec, b = self.profile, StepRecord(), self.buckets
        t0 = self.clock()
        cursor, computed, waited = t0, 0.0, 0.0
        for j in np.argsort(self.need, kind="stable"):
            cursor += max(self.need[j] - computed, 0.0)
            computed = max(computed, self.need[j])
            self._sleep_until(cursor, False)
            if self._pending:
                tw = self.clock()
                b.wait_bucket(j)
                cursor = self.clock()
                waited += cursor - tw
                cursor += self.update_s[j]
                self._sleep_until(cursor, False)
        rec.comm_span_s = b.times.span() if self._pending else 0.0     # the last step's reductions
        self._pending = False
        cursor += max(p.forward_s - computed, 0.0)
        self._sleep_until(cursor, False)
        b.begin(want_norm=False)
        tb = self.clock()
        for i, r in enumerate(self.plan.ready_times(p.param_ready_s)):
            self._sleep_until(tb + r, True)     # polling: progress where no thread makes it
            b.mark_ready(i)
        self._sleep_until(tb + p.backward_s, True)
        b.close_step()
        self._pending = True
        t1 = self.clock()
        rec.step_s = t1 - t0
        rec.exposed_s, rec.compute_s = waited, rec.step_s - waited
        rec.start_s, rec.forward_s, rec.backward_s, rec.optimizer_s = t0, tb - t0 - waited, t1 - tb, 0.0
        rec.intra_fwd_gap_s = waited
        return rec

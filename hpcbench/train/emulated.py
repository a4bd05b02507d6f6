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

Times are read on the run's clock (modelled seconds); the fields are those of
:class:`hpcbench.train.steprecord.StepRecord`.
"""

from __future__ import annotations

import math

import numpy as np

from hpcbench.train.buckets import BucketPlan, GradientBuckets
from hpcbench.train.steprecord import StepRecord

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
    profile : hpcbench.train.profile.ComputeProfile
        Parameter sizes and the timeline a step replays (modelled seconds).
    bucket_bytes : int
    overlap : bool
        Start each bucket when the profiled backward completes it (False: all after backward).
    dilation : hpcbench.runtime.dilation.TimeDilation
    """

    model = None

    def __init__(self, sync, profile, bucket_bytes: int, overlap: bool, dilation) -> None:
        self.sync, self.profile = sync, profile
        self.dilation, self.clock = dilation, dilation.now
        self.plan = BucketPlan(profile.numels, bucket_bytes)
        self.buckets = None
        if sync.averages == "gradients":
            self.buckets = GradientBuckets(self.plan, sync, self.clock, fill=1.0, overlap=overlap)
        else:
            self.model_buffer = np.zeros(int(sum(profile.numels)), dtype=np.float32)
        self._handle, self._done = None, math.nan

    def close(self) -> None:
        """Nothing to remove (no hooks); the synchroniser is closed by its owner."""

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

    def step(self, t: int, monitors=()) -> StepRecord:
        """Replay one step (``monitors`` are not supported: they need real gradients).

        Parameters
        ----------
        t : int
            Step number; a model-averaging synchroniser gets it as the
            buffer index of ``sync.start``.
        monitors : sequence, optional
            Ignored.

        Returns
        -------
        StepRecord
            ``compute_s``, ``comm_span_s``, ``exposed_s`` and ``step_s`` in
            modelled seconds (the run's clock); ``loss`` and
            ``local_sq_norm`` stay NaN and ``monitor_s`` 0.
        """
        p, rec = self.profile, StepRecord()
        t0 = self.clock()
        if self.buckets is None:
            self._handle, self._done = self.sync.start(self.model_buffer, t), math.nan
            self._sleep_until(t0 + p.forward_s + p.backward_s, True)
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
        self._sleep_until(t2 + p.optimizer_s, False)
        t4 = self.clock()
        rec.compute_s, rec.exposed_s, rec.step_s = (t1 - t0) + (t4 - t2), t2 - t1, t4 - t0
        return rec

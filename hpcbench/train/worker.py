"""One worker's training step under a synchroniser: real or emulated compute, timed.

Times are read on the run's clock (:meth:`hpcbench.runtime.dilation.TimeDilation.now`:
modelled seconds, wall seconds divided by the dilation factor).

Per step, on this rank:

``compute_s``
    forward + backward + optimizer (real: measured, including the hooks'
    copies into the buckets; emulated: the profiled times, as slept).
``comm_span_s``
    from the start of the first bucket's reduction (model averaging: of the
    model's) to the completion of the last.
``exposed_s``
    time spent after backward waiting for the reductions: the part of the
    communication not hidden behind backward (``hidden = 1 - exposed / span``).
``monitor_s``
    time in the monitors' ``observe``.
``step_s``
    the whole step.

Wrapped synchronisers (``ddp``, ``horovod``) reduce inside backward or the
optimizer step, out of the runner's sight: only ``step_s`` is measured and
the others are NaN.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import torch

from hpcbench.train.buckets import BucketPlan, GradientBuckets

__all__ = ["StepRecord", "Worker"]

#: longest single sleep (modelled seconds) of an emulated wait while buckets are open, so that
#: synchronisers progressed by polling (``compressed``) keep moving
_POLL_S = 2e-3


@dataclass
class StepRecord:
    """One step on one rank (modelled seconds; see the module docstring)."""

    compute_s: float = math.nan
    comm_span_s: float = math.nan
    exposed_s: float = math.nan
    monitor_s: float = 0.0
    step_s: float = math.nan
    loss: float = math.nan
    local_sq_norm: float = math.nan
    monitor_values: dict = field(default_factory=dict)

    def vector(self) -> np.ndarray:
        """The numbers the ranks gather, in a fixed order."""
        return np.array([self.compute_s, self.comm_span_s, self.exposed_s, self.monitor_s, self.step_s,
                         self.loss, self.local_sq_norm], dtype=np.float64)


class Worker:
    """A model replica (or its emulation), its optimizer and its synchroniser, on one rank.

    Parameters
    ----------
    model : torch.nn.Module or None
        The replica (real compute), None when emulated.
    sync : hpcbench.sync.Synchroniser
    profile : hpcbench.train.profile.ComputeProfile
        Parameter sizes, and the compute timeline an emulated step replays.
    data : object with ``batch(step)``, or None when emulated
    batch_size : int
        Samples per step on this worker.
    lr : float
        SGD learning rate.
    bucket_bytes : int
    overlap : bool
        Start each bucket during backward (False: all after backward).
    dilation : hpcbench.runtime.dilation.TimeDilation
    """

    def __init__(self, model, sync, profile, data, batch_size: int, lr: float, bucket_bytes: int,
                 overlap: bool, dilation) -> None:
        self.model, self.sync, self.profile, self.data = model, sync, profile, data
        self.batch_size = batch_size
        self.dilation, self.clock = dilation, dilation.now
        self.overlap = overlap
        self.params = [p for p in model.parameters() if p.requires_grad] if model is not None else []
        self.optimizer = torch.optim.SGD(self.params, lr=lr) if model is not None else None
        self.buckets = None
        self.plan = BucketPlan(profile.numels, bucket_bytes)
        self._norm = 0.0
        if sync.averages == "wrapped":
            self.model, self.optimizer = sync.wrap(model, self.optimizer, self._add_norm)
        elif sync.averages == "gradients":
            self.buckets = GradientBuckets(self.plan, sync, self.clock, fill=None if model is not None else 1.0,
                                           overlap=overlap)
            if model is not None:
                self.buckets.attach(self.params)
        else:
            self.model_buffer = torch.zeros(int(sum(profile.numels))) if model is None else None
            self._handle, self._done = None, math.nan
            # the model's exchange completes in the background: note when, from backward's hooks
            self._hooks = [p.register_post_accumulate_grad_hook(lambda p: self._poll()) for p in self.params]

    def _add_norm(self, flat: torch.Tensor) -> None:
        self._norm += float(torch.linalg.vector_norm(flat, dtype=torch.float64)) ** 2

    def close(self) -> None:
        """Remove hooks (the synchroniser is closed by its owner)."""
        if self.buckets is not None:
            self.buckets.detach()
        for h in getattr(self, "_hooks", ()):
            h.remove()

    def _poll(self) -> None:
        """Advance the open communication; note when a model exchange completes."""
        if self.buckets is not None:
            self.buckets.poll()
        elif self._handle is not None and self._done != self._done and self.sync.test(self._handle):
            self._done = self.clock()

    def _start_model(self, buf: torch.Tensor, t: int) -> None:
        self._handle, self._done = self.sync.start(buf, t), math.nan

    def _finish_model(self, t0: float) -> float:
        """Wait for the model exchange; returns its span from ``t0``."""
        self._poll()
        self.sync.wait(self._handle)
        end = self._done if self._done == self._done else self.clock()
        self._handle = None
        return end - t0

    # -- one step ---------------------------------------------------------------------------------
    def step(self, t: int, monitors=()) -> StepRecord:
        """Run training step ``t``; ``monitors`` observe it (gradient synchronisers only)."""
        if self.model is None:
            return self._emulated(t)
        if self.sync.averages == "gradients":
            return self._real_gradients(t, monitors)
        if self.sync.averages == "models":
            return self._real_models(t)
        return self._real_wrapped(t)

    def _forward_backward(self, t: int) -> float:
        x, y = self.data.batch(t)
        loss = torch.nn.functional.cross_entropy(self.model(x), y)
        loss.backward()
        return float(loss.detach())

    def _optimize(self) -> None:
        self.optimizer.step()
        self.optimizer.zero_grad()   # set_to_none by default (Horovod's wrapper takes no argument)

    def _real_gradients(self, t: int, monitors) -> StepRecord:
        from hpcbench.monitors import GradientView

        rec = StepRecord()
        keep = any(m.needs_local_grads for m in monitors)
        self.buckets.begin(keep_local=keep)
        t0 = self.clock()
        rec.loss = self._forward_backward(t)
        t1 = self.clock()
        self.buckets.finish()
        t2 = self.clock()
        grads = self.buckets.set_grads(self.params)
        rec.local_sq_norm = self.buckets.local_sq_norm
        if monitors:
            b = self.buckets
            view = GradientView(step=t, local_sq_norm=b.local_sq_norm,
                                local_grads=b.views(self.params, b.local) if keep else None,
                                global_grads=grads, local_batch=self.batch_size,
                                global_batch=self.batch_size * self.sync.comm.size, comm=self.sync.comm)
            for m in monitors:
                rec.monitor_values.update({f"{m.name}_{k}": float(v) for k, v in m.observe(view).items()})
        t3 = self.clock()
        self._optimize()
        t4 = self.clock()
        rec.compute_s, rec.exposed_s, rec.monitor_s, rec.step_s = (t1 - t0) + (t4 - t3), t2 - t1, t3 - t2, t4 - t0
        rec.comm_span_s = self.buckets.times.span()
        return rec

    def _real_models(self, t: int) -> StepRecord:
        rec = StepRecord()
        t0 = self.clock()
        vec = torch.nn.utils.parameters_to_vector(self.params).detach()
        buf = vec.clone()
        self._start_model(buf, t)
        rec.loss = self._forward_backward(t)
        t1 = self.clock()
        rec.comm_span_s = self._finish_model(t0)
        t2 = self.clock()
        self.sync.mix(vec, buf, t)
        torch.nn.utils.vector_to_parameters(vec, self.params)
        self._optimize()
        t4 = self.clock()
        rec.compute_s, rec.exposed_s, rec.step_s = (t1 - t0) + (t4 - t2), t2 - t1, t4 - t0
        return rec

    def _real_wrapped(self, t: int) -> StepRecord:
        rec = StepRecord()
        self._norm = 0.0
        t0 = self.clock()
        rec.loss = self._forward_backward(t)
        self._optimize()
        rec.step_s = self.clock() - t0
        rec.local_sq_norm = self._norm if self.sync.name == "ddp" else math.nan
        return rec

    # -- emulated ---------------------------------------------------------------------------------
    def _sleep_until(self, target: float, polling: bool) -> None:
        while True:
            left = target - self.clock()
            if left <= 0:
                return
            self.dilation.sleep(min(left, _POLL_S) if polling else left)
            if polling:
                self._poll()

    def _emulated(self, t: int) -> StepRecord:
        p, rec = self.profile, StepRecord()
        t0 = self.clock()
        if self.sync.averages == "models":
            self._start_model(self.model_buffer, t)
            self._sleep_until(t0 + p.forward_s + p.backward_s, True)
            t1 = self.clock()
            rec.comm_span_s = self._finish_model(t0)
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


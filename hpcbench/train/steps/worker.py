"""One worker's training step under a synchroniser, with the real model (``compute: real``), timed.

Times are read on the run's clock (:meth:`hpcbench.runtime.dilation.TimeDilation.now`:
modelled seconds, wall seconds divided by the dilation factor). On a GPU the
step's boundaries are read after synchronising the device
(:class:`hpcbench.runtime.devicetime.DeviceClock`), so no interval ends while
its kernels are still queued; the buckets' start and completion times inside
backward are host times (reading them must not stall the stream).

The per-step record is :class:`hpcbench.train.steps.steprecord.StepRecord`; the
emulated worker is :class:`hpcbench.train.steps.emulated.EmulatedWorker`.
"""

from __future__ import annotations

import math

import torch

from hpcbench.train.synchronisation.buckets import BucketPlan, GradientBuckets
from hpcbench.train.steps.profile import parameter_owners
from hpcbench.train.steps.steprecord import StepRecord

__all__ = ["StepRecord", "Worker"]


class Worker:
    """A model replica, its optimizer and its synchroniser, on one rank.

    Parameters
    ----------
    model : torch.nn.Module
        The replica.
    sync : hpcbench.sync.Synchroniser
    profile : hpcbench.train.steps.profile.ComputeProfile
        Parameter sizes (the bucket plan).
    state : hpcbench.train.steps.context.BatchState
        The run's batch sizes and learning rate (read at each step; the
        starting learning rate is ``state.lr``, later ones arrive through
        :meth:`set_learning_rate`).
    bucket_bytes : int
    overlap : bool
        Start each bucket during backward (False: all after backward).
    dilation : hpcbench.runtime.dilation.TimeDilation
    order : sequence of int, optional
        ``schedule: priority`` (gradient synchronisers): the buckets' start
        order (:func:`hpcbench.train.synchronisation.priority.priority_order`). Each bucket's
        parameters are then updated by their own SGD step in a forward
        pre-hook of the next forward, once the bucket is reduced; None: FIFO.
    device : hpcbench.runtime.device.Device, optional
        Where the model and its buckets live (default: the CPU). The model and
        the batches must already be there.
    host_staging : bool
        Hand the synchroniser host copies of the buckets (or of the model
        vector), :class:`hpcbench.sync.staged.HostStaged`; needed on a GPU by
        every synchroniser that is not ``"wrapped"``.
    speed : float, default 1
        Slowdown factor ``k >= 1`` of this worker (the config's ``speed``, a
        heterogeneous device on one host): after the forward, and after
        backward, it sleeps ``k - 1`` times their measured time, polling the
        open buckets. The buckets still start as the real backward fills
        them (a slower device would fill them later, in proportion).
    """

    def __init__(self, model, sync, profile, state, bucket_bytes: int, overlap: bool, dilation,
                 order=None, device=None, host_staging: bool = False, speed: float = 1.0) -> None:
        from hpcbench.runtime.device import CPU
        from hpcbench.runtime.devicetime import DeviceClock

        device = device if device is not None else CPU
        if host_staging and sync.averages != "wrapped":
            from hpcbench.sync.staged import HostStaged

            sync = HostStaged(sync, device)
        self.model, self.sync, self.profile, self.state = model, sync, profile, state
        self.device = device
        lr = state.lr
        self._dclock = DeviceClock(device, dilation.now)
        self.dilation, self.clock = dilation, self._dclock.now
        self._fwd_marks = None
        self.overlap = overlap
        self.speed = float(speed)
        self.params = [p for p in model.parameters() if p.requires_grad]
        self.optimizer = torch.optim.SGD(self.params, lr=lr)
        self.buckets = None
        self.order = order if sync.averages == "gradients" else None
        self.plan = BucketPlan(profile.numels, bucket_bytes)
        self._norm = 0.0
        self.pipeline = None
        sparse = sync.sparse_optimizer(lr) if sync.averages == "gradients" else None
        if sync.averages == "gradients" and self.order is None and (sync.staleness or sparse is not None):
            from hpcbench.train.steps.pipelined import PipelinedStep

            self.pipeline = PipelinedStep(self, device.torch, sparse)
            self.buckets = self.pipeline.current
        elif sync.averages == "wrapped":
            self.model, self.optimizer = sync.wrap(model, self.optimizer, self._add_norm)
        elif sync.averages == "gradients":
            self.buckets = GradientBuckets(self.plan, sync, dilation.now, overlap=overlap, order=self.order,
                                           device=device.torch)
            self.buckets.attach(self.params)
            if self.order is not None:
                self._priority_setup(lr)
        else:
            self._handle, self._done = None, math.nan
            self._flat, self._send, self._ptrs = None, None, ()
            # the model's exchange completes in the background: note when, from backward's hooks
            self._hooks = [p.register_post_accumulate_grad_hook(lambda p: self._poll()) for p in self.params]

    def _add_norm(self, flat: torch.Tensor) -> None:
        # a GPU's stays a tensor until the step ends: reading it here would synchronise the device inside
        # backward at every bucket. The same chunked norm as the gradient buckets': converting a bucket
        # to float64 first (``vector_norm(dtype=float64)``) cost DDP 87 ms of a 0.6 s ResNet-18 step on
        # one core, work DDP itself does not do
        from hpcbench.monitors.norms import sq_norm_deferred

        self._norm = self._norm + sq_norm_deferred(flat)

    def _priority_setup(self, lr: float) -> None:
        """One SGD optimizer per bucket, the reduced gradients' views, and forward pre-hooks that update
        each bucket's parameters before their first use."""
        plan = self.plan
        self._views = self.buckets.views(self.params)
        self._bucket_opts = [torch.optim.SGD([self.params[i] for i in b], lr=lr) for b in plan.buckets]
        self._pending = [False] * len(plan.buckets)
        self._waited = 0.0
        self._hooks = []
        for mod, ids in parameter_owners(self.model, self.params):
            bs = sorted({plan.where[i][0] for i in ids})
            self._hooks.append(mod.register_forward_pre_hook(lambda m, a, bs=bs: self._apply(bs)))

    def _apply(self, buckets) -> None:
        """Wait for each pending bucket of ``buckets`` and take its parameters' SGD step."""
        for b in buckets:
            if not self._pending[b]:
                continue
            tw = self.clock()
            self.buckets.wait_bucket(b)
            self._waited += self.clock() - tw
            for i in self.plan.buckets[b]:
                self.params[i].grad = self._views[i]
            self._bucket_opts[b].step()
            self.buckets.flats[b].zero_()   # the .grad views stay (GradientBuckets.zero)
            self._pending[b] = False

    def set_learning_rate(self, lr: float) -> None:
        """Take SGD steps of ``lr`` from now on (every optimizer of this replica)."""
        for opt in [self.optimizer, *getattr(self, "_bucket_opts", ())]:
            for group in opt.param_groups:
                group["lr"] = lr
        if self.pipeline is not None:
            self.pipeline.set_learning_rate(lr)

    def settle(self) -> None:
        """Make the model what the next forward will use, without changing the update rule (before evaluating
        it or changing the synchroniser's ratio): ``schedule: priority`` applies what the last step left; a
        staleness-1 step stays in flight (its update is the one after next forward's)."""
        if self.order is not None:
            self._apply(range(len(self._pending)))

    def flush(self) -> None:
        """Complete and apply everything in flight (the end of a run, a switch of synchroniser): :meth:`settle`,
        then a staleness-1 step's update."""
        self.settle()
        if self.pipeline is not None:
            self.pipeline.drain()

    def close(self) -> None:
        """Remove hooks (the synchroniser is closed by its owner). Pending updates are not applied: after a
        failure the other ranks may never complete the buckets; :meth:`flush` first on a normal end."""
        if self.pipeline is not None:
            self.pipeline.close()
        elif self.buckets is not None:
            self.buckets.detach()
        for h in getattr(self, "_hooks", ()):
            h.remove()

    def _poll(self) -> None:
        """Advance the open communication; note when a model exchange completes."""
        if self.buckets is not None:
            self.buckets.poll()
        elif self._handle is not None and self._done != self._done and self.sync.test(self._handle):
            self._done = self.dilation.now()      # inside backward: a host time, no device sync

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
    def step(self, t: int, batch, monitors=()) -> StepRecord:
        """Run training step ``t`` on ``batch`` (inputs, labels); ``monitors`` observe it (gradient
        synchronisers only)."""
        if self.pipeline is not None:
            if monitors:
                raise ValueError("monitors need the dense reduced gradients; the sparse optimizer and staleness "
                                 "pipeline do not build them")
            rec, self.buckets = self.pipeline.step(batch)
            return rec
        if self.sync.averages == "gradients":
            return self._real_gradients(t, batch, monitors)
        if self.sync.averages == "models":
            return self._real_models(t, batch)
        return self._real_wrapped(batch)

    def _forward_backward(self, batch) -> float:
        """Forward and backward of ``batch``; the loss.

        The forward's end is ``self._forward_end`` (run's clock). On a GPU it is not read by
        synchronising (that would drain the stream between forward and backward: the host then queues
        backward's first kernels onto an idle device, measured at 6-9 ms per ResNet-50 step at batch 64
        on an H100) but from two CUDA events around the forward, turned into seconds by :meth:`_times`
        once the step's end has synchronised.
        """
        x, y = batch
        if self._dclock.cuda:
            start = self._dclock.mark()
            loss = torch.nn.functional.cross_entropy(self.model(x), y)
            self._fwd_marks, self._forward_end = (start, self._dclock.mark()), None
        else:
            t0 = self.clock()
            loss = torch.nn.functional.cross_entropy(self.model(x), y)
            self._slow_down(t0)
            self._forward_end = self.clock()
        loss.backward()
        self._slow_down(self._forward_end)
        return float(loss.detach())

    def _slow_down(self, since: float) -> None:
        """``speed`` k > 1: sleep (k - 1) times the compute since ``since``, polling the open buckets (CPU: on a
        GPU, where the forward's end is read later from events, ``since`` is None and nothing is slept)."""
        if self.speed == 1.0 or since is None:
            return
        until = self.clock() + (self.speed - 1.0) * (self.clock() - since)
        pipe = self.pipeline
        while True:
            left = until - self.clock()
            if left <= 0:
                return
            self.dilation.sleep(min(left, 1e-3))
            if pipe is not None:
                pipe.poll()
            elif self.buckets is not None:
                self.buckets.poll()

    def _times(self, rec: StepRecord, t0: float, t_bwd_end: float, opt_s: float) -> None:
        """The step's start, forward, backward and optimizer times into ``rec``."""
        if self._forward_end is None:   # GPU: the forward's device time from its events, on the run's clock
            self._forward_end = t0 + self.dilation.to_model(self._dclock.seconds(*self._fwd_marks))
        rec.start_s, rec.forward_s, rec.backward_s = t0, self._forward_end - t0, t_bwd_end - self._forward_end
        rec.optimizer_s = opt_s

    def _optimize(self) -> None:
        self.optimizer.step()
        if self.sync.averages == "models":
            # the gradients stay, zeroed, as the gradient buckets' views do: no fresh allocation next backward
            self.optimizer.zero_grad(set_to_none=False)
        else:
            self.optimizer.zero_grad()   # the frameworks' own default (Horovod's wrapper takes no argument)

    def _observe(self, t: int, monitors, global_grads, keep: bool, rec: StepRecord) -> None:
        """Show the monitors step ``t``'s gradients (local ones kept when ``keep``); their outputs into ``rec``."""
        from hpcbench.monitors import GradientView

        b = self.buckets
        view = GradientView(step=t, local_sq_norm=b.local_sq_norm,
                            local_grads=b.views(self.params, b.local) if keep else None,
                            global_grads=global_grads, local_batch=self.state.local,
                            global_batch=self.state.global_batch, comm=self.sync.comm)
        for m in monitors:
            rec.monitor_values.update({f"{m.label}_{k}": float(v) for k, v in m.observe(view).items()})

    def _real_gradients(self, t: int, batch, monitors) -> StepRecord:
        if self.order is not None:
            return self._priority_gradients(t, batch, monitors)
        rec = StepRecord()
        keep = any(m.needs_local_grads for m in monitors)
        self.buckets.begin(keep_local=keep)
        t0 = self.clock()
        rec.loss = self._forward_backward(batch)
        t1 = self.clock()
        self.buckets.finish()
        t2 = self.clock()
        grads = self.buckets.set_grads(self.params)
        rec.local_sq_norm = self.buckets.local_sq_norm
        if monitors:
            self._observe(t, monitors, grads, keep, rec)
        t3 = self.clock()
        self.optimizer.step()
        self.buckets.zero()         # the .grad views stay: the next backward accumulates into the buckets
        t4 = self.clock()
        rec.compute_s, rec.exposed_s, rec.monitor_s, rec.step_s = (t1 - t0) + (t4 - t3), t2 - t1, t3 - t2, t4 - t0
        rec.comm_span_s = self.buckets.times.span()
        self._times(rec, t0, t1, t4 - t3)
        return rec

    def _model_flat(self) -> torch.Tensor:
        """The parameters as views of one flat tensor, made at the first model step and again whenever
        something gave a parameter other storage (a policy's broadcast, a restore); with the send buffer
        beside it, no step allocates or flattens the model (each 46.8 MB allocation of ResNet-18 cost its
        page faults, about 30 ms on one CPU core)."""
        params = self.params
        if self._flat is None or any(p.data_ptr() != q for p, q in zip(params, self._ptrs)):
            with torch.no_grad():
                flat = torch.nn.utils.parameters_to_vector(params).detach()
                torch.nn.utils.vector_to_parameters(flat, params)
            self._flat, self._ptrs = flat, tuple(p.data_ptr() for p in params)
            if self._send is None or self._send.shape != flat.shape:
                self._send = torch.empty_like(flat)
        return self._flat

    def _real_models(self, t: int, batch) -> StepRecord:
        rec = StepRecord()
        t0 = self.clock()
        vec = self._model_flat()
        buf = self._send
        buf.copy_(vec)
        self._start_model(buf, t)
        rec.loss = self._forward_backward(batch)
        t1 = self.clock()
        rec.comm_span_s = self._finish_model(t0)
        t2 = self.clock()
        self.sync.mix(vec, buf, t)      # the parameters are views of vec: mixed in place
        self._optimize()
        t4 = self.clock()
        rec.compute_s, rec.exposed_s, rec.step_s = (t1 - t0) + (t4 - t2), t2 - t1, t4 - t0
        self._times(rec, t0, t1, t4 - t2)
        return rec

    def _real_wrapped(self, batch) -> StepRecord:
        rec = StepRecord()
        self._norm = 0.0
        t0 = self.clock()
        rec.loss = self._forward_backward(batch)
        t1 = self.clock()
        self._optimize()
        rec.step_s = self.clock() - t0
        self._times(rec, t0, t1, rec.step_s - (t1 - t0))
        rec.local_sq_norm = float(self._norm) if self.sync.sees_local_buckets else math.nan
        return rec

    def _priority_gradients(self, t: int, batch, monitors) -> StepRecord:
        """``schedule: priority``: the forward updates each bucket's parameters before their first use
        (waiting for the last step's reduction); backward releases this step's buckets in their order and the
        step ends without waiting, unless a monitor is due (it needs the reduced gradients now)."""
        rec = StepRecord()
        keep = any(m.needs_local_grads for m in monitors)
        self._waited = 0.0
        had = any(self._pending)
        t0 = self.clock()
        x, y = batch
        loss = torch.nn.functional.cross_entropy(self.model(x), y)
        self.flush()        # parameters the forward did not use
        self._forward_end = self.clock()
        rec.comm_span_s = self.buckets.times.span() if had else 0.0     # the last step's reductions
        self.buckets.begin(keep_local=keep)
        loss.backward()
        rec.loss = float(loss.detach())
        self.buckets.close_step()
        self._pending = [True] * len(self._pending)
        rec.local_sq_norm = self.buckets.local_sq_norm
        t1 = self.clock()
        if monitors:
            self.buckets.finish()
            t2 = self.clock()
            self._observe(t, monitors, self._views, keep, rec)
            rec.monitor_s = self.clock() - t2
            self._waited += t2 - t1
        rec.step_s = self.clock() - t0
        rec.exposed_s = self._waited
        rec.compute_s = rec.step_s - rec.exposed_s - rec.monitor_s
        self._times(rec, t0, t1, 0.0)       # the updates run inside the forward
        rec.intra_fwd_gap_s = self._waited
        if monitors:
            rec.comm_span_s = self.buckets.times.span()
        return rec

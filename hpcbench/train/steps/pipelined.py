"""StellaTrain's step on a real model: the CPU sparse optimizer and staleness-1 pipelining (``compute: real``).

A ``compressed`` synchroniser with ``optimizer`` or ``staleness: 1``
(:class:`hpcbench.sync.compressed.CompressedSync`, where the update rule is
stated) trains through :class:`PipelinedStep` instead of the worker's FIFO
step:

- **Sparse optimizer.** The parameters are re-seated as views of one flat
  float32 tensor per gradient bucket (same plan, same offsets), so that a
  bucket's sparse sum over ranks, the compressed allreduce's
  ``(indices, values)`` parts, is applied by
  :meth:`hpcbench.optim.SparseOptimizer.step` straight into the bucket's
  parameters (``average_over`` the world size), without a dense gradient.
  StellaTrain's CPU optimizer (``engine/modules/cpu_optimize.cpp``) updates
  a CPU copy of each parameter the same way and copies it to the GPU after.
- **Staleness 1.** Two bucket sets alternate by step; a step's buckets are
  started during its backward and left in flight; after the next step's
  backward the runner waits for them and applies their update. The
  in-flight buckets are polled from the gradient hooks, so their
  communication progresses during the next step's forward and backward.

Times on the run's clock; per step: ``exposed_s`` the wait for the buckets
applied in this step (the step's own with staleness 0, the previous one's
with staleness 1), ``optimizer_s`` their update, ``comm_span_s`` their
reduction's span.
"""

from __future__ import annotations

import torch

from hpcbench.train.synchronisation.buckets import GradientBuckets
from hpcbench.train.steps.steprecord import StepRecord

__all__ = ["PipelinedStep", "flatten_parameters"]


def flatten_parameters(params, plan) -> list[torch.Tensor]:
    """Re-seat ``params`` as views of one flat float32 tensor per bucket of ``plan``; returns the flats.

    Parameters
    ----------
    params : sequence of torch.nn.Parameter
        In the plan's order (registration order), float32, on the CPU.
    plan : hpcbench.train.synchronisation.buckets.BucketPlan

    Raises
    ------
    ValueError
        A parameter is not float32 on the CPU (the sparse optimizer works on host float32 buffers).
    """
    flats = [torch.empty(int(n), dtype=torch.float32) for n in plan.numel]
    with torch.no_grad():
        for i, (p, (b, off)) in enumerate(zip(params, plan.where)):
            if p.dtype != torch.float32 or p.device.type != "cpu":
                raise ValueError(f"parameter {i} is {p.dtype} on {p.device}: the CPU sparse optimizer needs "
                                 f"float32 CPU parameters")
            view = flats[b][off:off + p.numel()]
            view.copy_(p.detach().reshape(-1))
            p.data = view.view_as(p)
    return flats


class PipelinedStep:
    """The training step of a real replica with a CPU sparse optimizer and/or staleness 1.

    Parameters
    ----------
    worker : hpcbench.train.steps.worker.Worker
        The replica (its ``params``, ``optimizer``, ``plan``, ``sync``, ``clock``, ``overlap``).
    device : str
        torch device of the buckets (``"cpu"``).
    sparse : hpcbench.optim.SparseOptimizer or None
        The synchroniser's sparse optimizer (:meth:`hpcbench.sync.Synchroniser.sparse_optimizer`), or None:
        torch's optimizer applies the reduced buckets.
    """

    def __init__(self, worker, device: str, sparse) -> None:
        self.w = worker
        sync = worker.sync
        self.staleness = int(sync.staleness)
        self.sparse = sparse
        self.sets = [GradientBuckets(worker.plan, sync, worker.clock, overlap=worker.overlap, device=device)
                     for _ in range(self.staleness + 1)]
        self.current = self.sets[0]
        self.inflight: GradientBuckets | None = None
        self._parity = 0
        self.flat_params = flatten_parameters(worker.params, worker.plan) if self.sparse is not None else None
        self.hooks = [p.register_post_accumulate_grad_hook(lambda p, i=i: self._on_grad(i, p.grad))
                      for i, p in enumerate(worker.params)]

    def _on_grad(self, index: int, grad) -> None:
        self.current.add_grad(index, grad)
        if self.inflight is not None:
            self.inflight.poll()

    def poll(self) -> None:
        """Advance every open bucket (this step's and the one in flight)."""
        self.current.poll()
        if self.inflight is not None:
            self.inflight.poll()

    def set_learning_rate(self, lr: float) -> None:
        if self.sparse is not None:
            self.sparse.lr = float(lr)

    def _apply(self, buckets: GradientBuckets) -> None:
        """Apply a completed bucket set's update: the sparse optimizer on its sparse sums, else torch's SGD on
        the reduced buckets."""
        w = self.w
        if self.sparse is None:
            buckets.set_grads(w.params)
            w.optimizer.step()
            return
        p = w.sync.comm.size
        for b, result in enumerate(buckets.results):
            self.sparse.step(f"bucket{b}", self.flat_params[b], result, average_over=p)

    def drain(self) -> None:
        """Wait for the step in flight (staleness 1) and apply its update."""
        if self.inflight is not None:
            self.inflight.finish()
            self._apply(self.inflight)
            self.inflight = None

    def close(self) -> None:
        for h in self.hooks:
            h.remove()
        self.hooks = []

    def step(self, batch) -> tuple[StepRecord, GradientBuckets]:
        """Train one step on ``batch``; returns its record and the bucket set whose update it applied (the
        current one before the first update of a staleness-1 run)."""
        w, rec = self.w, StepRecord()
        cur = self.current = self.sets[self._parity]
        cur.begin()
        t0 = w.clock()
        rec.loss = w._forward_backward(batch)
        t1 = w.clock()
        if self.staleness:
            cur.close_step()        # start what backward left; its reduction runs during the next step
            done = self.inflight
        else:
            done = cur
        if done is not None:
            done.finish()
        t2 = w.clock()
        if done is not None:
            self._apply(done)
        w.optimizer.zero_grad()     # the local gradients are in the buckets
        t4 = w.clock()
        if self.staleness:
            self.inflight = cur
            self._parity = (self._parity + 1) % len(self.sets)
        rec.compute_s, rec.exposed_s, rec.step_s = (t1 - t0) + (t4 - t2), t2 - t1, t4 - t0
        rec.comm_span_s = done.times.span() if done is not None else 0.0
        rec.local_sq_norm = cur.local_sq_norm
        w._times(rec, t0, t1, t4 - t2)
        return rec, done if done is not None else cur

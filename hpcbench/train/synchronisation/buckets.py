"""Gradient buckets reduced while backward runs (DDP's bucketing, on any synchroniser).

Parameters are assigned to buckets in reverse registration order (backward
produces the last layers' gradients first), each bucket closing once it
holds ``bucket_bytes`` or more (Li et al., "PyTorch Distributed: experiences
on accelerating data parallel training", VLDB 2020; DDP's ``bucket_cap_mb``
25 MB default). A post-accumulate-grad hook copies each gradient into its
bucket's flat float32 buffer; a bucket whose gradients are all there is
started at once, in bucket order (as DDP, so every rank starts the same
operation sequence even if hooks fire in a slightly different order), by
:meth:`hpcbench.sync.Synchroniser.start`. Before it starts, its squared
L2 norm is added to the local squared gradient norm (the monitors'
``GradientView.local_sq_norm``), on the main thread while earlier buckets are
on the wire. After backward, :meth:`GradientBuckets.finish` waits for the
rest; the parameters' ``.grad`` then become views of the reduced buffers.

The ``.grad`` views stay (DDP's ``gradient_as_bucket_view``): after the
optimizer step :meth:`GradientBuckets.zero` zeroes the buffers instead of
dropping the gradients, so the next backward accumulates each gradient into
its bucket in place and the hook has nothing to copy. Dropping them
(``zero_grad(set_to_none=True)``) made every backward allocate ResNet-18's
46.8 MB of gradients afresh (about 10,000 page faults per step) and the hooks
copy them into the buckets: 2.5 % of a 64x64, batch-32 step on one core.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable, Sequence

import numpy as np

if TYPE_CHECKING:
    import torch

__all__ = ["BucketPlan", "GradientBuckets", "BucketTimes"]


class BucketPlan:
    """Which parameter goes to which bucket, at which offset.

    Parameters
    ----------
    numels : sequence of int
        Elements of each parameter, in registration order.
    bucket_bytes : int
        Bucket capacity in bytes (float32: 4 bytes per element), > 0.

    Attributes
    ----------
    buckets : list of list of int
        Parameter indices of each bucket (bucket 0 holds the last parameters).
    numel : numpy.ndarray of int64, shape (n_buckets,)
        Elements of each bucket.
    where : list of (int, int)
        ``(bucket, offset)`` of each parameter.
    """

    def __init__(self, numels: Sequence[int], bucket_bytes: int) -> None:
        if bucket_bytes <= 0:
            raise ValueError(f"bucket_bytes must be > 0, got {bucket_bytes!r}")
        self.numels = [int(n) for n in numels]
        self.buckets: list[list[int]] = []
        self.where: list[tuple[int, int]] = [(0, 0)] * len(self.numels)
        current, size = [], 0
        for i in reversed(range(len(self.numels))):
            self.where[i] = (len(self.buckets), size)
            current.append(i)
            size += self.numels[i]
            if 4 * size >= bucket_bytes:
                self.buckets.append(current)
                current, size = [], 0
        if current:
            self.buckets.append(current)
        self.numel = np.array([sum(self.numels[i] for i in b) for b in self.buckets], dtype=np.int64)

    @property
    def nbytes(self) -> np.ndarray:
        """Bytes of each bucket (float32)."""
        return 4 * self.numel

    def ready_times(self, param_ready_s: Sequence[float]) -> np.ndarray:
        """When each bucket is complete, given when each parameter's gradient is: the latest of its parameters."""
        r = np.asarray(param_ready_s, dtype=np.float64)
        return np.array([r[b].max() for b in self.buckets])


class BucketTimes:
    """Per-step timing of the buckets, in modelled seconds of the runner's clock.

    Attributes
    ----------
    started, completed : numpy.ndarray of float64, shape (n_buckets,)
        When each bucket was started, and when it was first seen complete
        (a poll from a gradient hook, or the end of its wait).
    """

    def __init__(self, n: int) -> None:
        self.started = np.full(n, np.nan)
        self.completed = np.full(n, np.nan)

    def span(self) -> float:
        """From the first start to the last completion."""
        return float(np.nanmax(self.completed) - np.nanmin(self.started)) if len(self.started) else 0.0


class GradientBuckets:
    """The flat gradient buffers of one model replica and their reduction by a synchroniser.

    Parameters
    ----------
    plan : BucketPlan
    sync : hpcbench.sync.Synchroniser
        A synchroniser averaging ``"gradients"``.
    clock : callable
        ``clock() -> float`` seconds (modelled time under time dilation).
    fill : float or None
        Emulated runs: the buffers are numpy float32 arrays holding this value
        (no gradient is copied in, and the process need not import torch);
        None: torch float32 tensors, zeroed.
    overlap : bool
        Start each bucket as soon as it is complete (False: all of them in
        :meth:`finish`, after backward).
    order : sequence of int, optional
        ``schedule: priority``: the step's buckets are reduced one at a time in
        this order (:meth:`hpcbench.sync.Synchroniser.start_ordered`), each
        once complete; the caller waits for single buckets with
        :meth:`wait_bucket` (:mod:`hpcbench.train.synchronisation.priority`). None: FIFO, as
        DDP.
    device : str, optional
        torch device of the buckets (``"cpu"``, ``"cuda:0"``; real models). On a
        GPU the local squared norm is summed on the device and read once, after
        the step's buckets are started (no synchronisation inside backward).
    """

    def __init__(self, plan: BucketPlan, sync, clock: Callable[[], float], fill: float | None = None,
                 overlap: bool = True, order: Sequence[int] | None = None, device: str = "cpu") -> None:
        self.plan, self.sync, self.clock, self.overlap = plan, sync, clock, overlap
        self.order = None if order is None else [int(i) for i in order]
        self._ordered = None
        if fill is None:
            import torch

            self.flats = [torch.zeros(int(n), device=device) for n in plan.numel]
        else:
            self.flats = [np.full(int(n), fill, dtype=np.float32) for n in plan.numel]
        self._missing = [len(b) for b in plan.buckets]
        self._seen = np.zeros(len(plan.numels), dtype=bool)
        self._next = 0
        self._handles: list = []
        self._open: list[int] = []
        self.want_norm = True
        self.keep_local = False
        self.local: list[torch.Tensor | None] = [None] * len(self.flats)
        #: what :meth:`hpcbench.sync.Synchroniser.wait` returned for each bucket (a CPU sparse optimizer's
        #: sparse sums; None otherwise), once :meth:`finish` has waited
        self.results: list = [None] * len(self.flats)
        self._sq_norm = 0.0
        self.times = BucketTimes(len(self.flats))
        self._hooks: list = []

    # -- per step -------------------------------------------------------------------------------
    def begin(self, keep_local: bool = False, want_norm: bool = True) -> None:
        """Start a step: nothing filled, nothing started."""
        self._missing = [len(b) for b in self.plan.buckets]
        self._seen = np.zeros(len(self.plan.numels), dtype=bool)
        self._next = 0
        self._handles, self._open = [], []
        self.keep_local, self.want_norm = keep_local, want_norm
        self.local = [None] * len(self.flats)
        self.results = [None] * len(self.flats)
        self._sq_norm = 0.0
        self.times = BucketTimes(len(self.flats))
        if self.order is not None:
            self._ordered = self.sync.start_ordered(self.flats, self.order, self.clock)
            self.times.started, self.times.completed = self._ordered.started_at, self._ordered.completed_at

    def add_grad(self, index: int, grad: torch.Tensor) -> None:
        """Copy parameter ``index``'s gradient into its bucket; start every bucket that is now complete."""
        b, off = self.plan.where[index]
        dst = self.flats[b][off:off + grad.numel()]
        if dst.data_ptr() != grad.data_ptr():      # not already accumulated in place (see :meth:`zero`)
            dst.copy_(grad.reshape(-1))
        self._seen[index] = True
        self._missing[b] -= 1
        self.poll()
        if self.overlap:
            self._start_ready()

    def mark_ready(self, bucket: int) -> None:
        """Emulated backward: bucket ``bucket``'s gradients are there (its buffer is used as it is)."""
        self._missing[bucket] = 0
        self.poll()
        if self.overlap:
            self._start_ready()

    def _start_ready(self) -> None:
        while self._next < len(self.flats) and self._missing[self._next] == 0:
            b = self._next
            flat = self.flats[b]
            if self.want_norm:
                self._add_norm(flat)
            if self.keep_local:
                self.local[b] = flat.clone()
            if self._ordered is not None:
                self._ordered.mark_ready(b)     # it goes on the wire when its turn in the order comes
            else:
                self.times.started[b] = self.clock()
                self._handles.append(self.sync.start(flat, b))
                self._open.append(b)
            self._next += 1

    def _add_norm(self, flat) -> None:
        from hpcbench.monitors.norms import sq_norm_deferred

        self._sq_norm = self._sq_norm + sq_norm_deferred(flat)     # a GPU's stays there: no stall of backward

    @property
    def local_sq_norm(self) -> float:
        """This step's local squared gradient norm (of the buckets started so far)."""
        if not isinstance(self._sq_norm, float):
            self._sq_norm = float(self._sq_norm)
        return self._sq_norm

    def wait_bucket(self, b: int) -> None:
        """``schedule: priority``: sleep until bucket ``b`` of the last step is reduced (after :meth:`close_step`)."""
        self._ordered.wait_one(b)

    def close_step(self) -> None:
        """``schedule: priority``: after backward, release what backward left (as :meth:`finish`) without waiting."""
        self._zero_missing()
        self._start_ready()

    def poll(self) -> None:
        """Advance the started buckets (never blocks); note when each completes."""
        if self._ordered is not None:
            self._ordered.poll()        # the progress thread moves and timestamps them, if there is one
            return
        still = []
        for b in self._open:
            if self.sync.test(self._handles[b]):
                self.times.completed[b] = self.clock()
            else:
                still.append(b)
        self._open = still

    def _zero_missing(self) -> None:
        """A parameter backward gave no gradient counts as zero; its bucket is then complete."""
        for b, missing in enumerate(self._missing):
            if missing:
                for i in self.plan.buckets[b]:
                    if not self._seen[i]:
                        _, off = self.plan.where[i]
                        self.flats[b][off:off + self.plan.numels[i]].zero_()
                self._missing[b] = 0

    def finish(self) -> None:
        """Start what backward left (a parameter without gradient counts as zero) and wait for every bucket."""
        self._zero_missing()
        self._start_ready()
        if self._ordered is not None:
            self._ordered.wait()
            return
        for b in range(len(self.flats)):
            self.results[b] = self.sync.wait(self._handles[b])
            if np.isnan(self.times.completed[b]):
                self.times.completed[b] = self.clock()
        self._open = []

    # -- real models ----------------------------------------------------------------------------
    def attach(self, params: Sequence[torch.nn.Parameter]) -> None:
        """Install a post-accumulate-grad hook on every parameter (``params`` in plan order)."""
        for i, p in enumerate(params):
            self._hooks.append(p.register_post_accumulate_grad_hook(
                lambda p, i=i: self.add_grad(i, p.grad)))

    def detach(self) -> None:
        """Remove the hooks."""
        for h in self._hooks:
            h.remove()
        self._hooks = []

    def views(self, params: Sequence[torch.nn.Parameter], buffers: Sequence[torch.Tensor] | None = None):
        """Per-parameter views (parameter shapes) into ``buffers`` (default: the reduced buckets)."""
        buffers = self.flats if buffers is None else buffers
        out = []
        for p, (b, off) in zip(params, self.plan.where):
            out.append(buffers[b][off:off + p.numel()].view_as(p))
        return out

    def set_grads(self, params: Sequence[torch.nn.Parameter]) -> list[torch.Tensor]:
        """Make each parameter's ``.grad`` the view of its reduced gradient; returns the views."""
        views = self.views(params)
        for p, g in zip(params, views):
            p.grad = g
        return views

    def zero(self) -> None:
        """Zero the buckets after the optimizer step, in place of ``zero_grad()``.

        The parameters' ``.grad`` stay the views :meth:`set_grads` made, so
        the next backward adds each new gradient into its bucket in place
        (autograd accumulates into a defined ``.grad``) and :meth:`add_grad`
        copies nothing: PyTorch DDP's ``gradient_as_bucket_view`` (Li et al.,
        VLDB 2020). A ``.grad`` that something else replaced (or dropped) is
        copied as before.
        """
        for flat in self.flats:
            flat.zero_()

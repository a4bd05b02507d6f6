"""Host staging: hpcbench's synchronisers on GPU tensors, through pinned host memory.

hpcbench's collectives (and MPI without CUDA support, such as the PyPI
``mpich`` wheel) move host memory only. :class:`HostStaged` puts any
``"gradients"`` or ``"models"`` synchroniser in front of device buffers the
way Horovod's and KungFu's CPU paths do (Horovod's ``MPI_GPU_ALLREDUCE``
off: the fusion buffer is copied to host, reduced by MPI, copied back):

1. :meth:`HostStaged.start` (called as backward completes a bucket) queues
   the copy of the bucket into a pinned host buffer on a side stream that
   first waits for the compute stream (so the copy reads the finished
   gradients without stalling the stream that computes the next ones) and
   records an event after it;
2. the bucket's reduction starts on the host buffer once its copy is done
   (noticed by :meth:`HostStaged.test`, which the gradient hooks call while
   backward goes on, or forced by :meth:`HostStaged.wait`), always in the
   order the buckets were started, so every rank starts the same operations
   in the same order;
3. once reduced (:meth:`HostStaged.wait`, after backward), the host buffer
   is copied back into the device bucket on the compute stream
   (asynchronously: the optimizer's kernels queue behind it).

Host buffers are pooled by size and reused every step (pinned allocation
costs milliseconds). On CPU tensors every copy is a plain ``copy_`` and the
result is bit for bit the direct path's (the same reduction of the same
values), which the tests check; this is how the staging is tested without a
GPU.
"""

from __future__ import annotations

from collections import deque
from typing import Any

__all__ = ["HostStaged", "StagedHandle"]


class StagedHandle:
    """One staged buffer: the device bucket, its host copy, and the inner synchroniser's handle.

    Attributes
    ----------
    flat : torch.Tensor
        The caller's buffer (1-D, any device).
    host : torch.Tensor
        Its host copy (pinned when ``flat`` is on a GPU).
    index : int
        The caller's buffer index.
    copied : torch.cuda.Event or None
        Recorded after the device-to-host copy (None on CPU: copied already).
    inner : object or None
        The inner synchroniser's handle once the reduction started.
    back : bool
        Whether the result was copied back into ``flat``.
    """

    __slots__ = ("flat", "host", "index", "copied", "inner", "back")

    def __init__(self, flat, host, index: int, copied=None) -> None:
        self.flat, self.host, self.index, self.copied = flat, host, index, copied
        self.inner, self.back = None, False


class HostStaged:
    """``sync`` applied to host copies of the caller's buffers (see the module docstring).

    Parameters
    ----------
    sync : hpcbench.sync.Synchroniser
        A synchroniser averaging ``"gradients"`` or ``"models"`` (the inner one,
        which only ever sees host tensors).
    device : hpcbench.runtime.device.Device
        Where the caller's buffers live (CPU: plain copies, for tests and for
        measuring the staging's own cost).

    Notes
    -----
    Every attribute other than ``start``, ``test`` and ``wait`` is the inner
    synchroniser's (its capabilities, ``mix``, ``comm``, ``close``). The
    ordered start of ``schedule: priority`` is not staged (configs refuse it).
    """

    def __init__(self, sync, device) -> None:
        import torch

        self.sync, self.device = sync, device
        self.cuda = bool(device.is_cuda)
        self._torch = torch
        self._stream = torch.cuda.Stream(device=device.index) if self.cuda else None
        self._free: dict[tuple, list] = {}
        self._queue: deque[StagedHandle] = deque()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.sync, name)

    def _host_buffer(self, flat):
        key = (int(flat.numel()), flat.dtype)
        pool = self._free.get(key)
        if pool:
            return pool.pop()
        return self._torch.empty(key[0], dtype=flat.dtype, pin_memory=self.cuda)

    def start(self, flat, index: int) -> StagedHandle:
        """Queue ``flat``'s copy to host; its reduction starts once the copy is done (in start order)."""
        torch = self._torch
        host = self._host_buffer(flat)
        if self.cuda:
            stream = self._stream
            stream.wait_stream(torch.cuda.current_stream(self.device.index))
            with torch.cuda.stream(stream):
                host.copy_(flat, non_blocking=True)
                copied = torch.cuda.Event()
                copied.record(stream)
            flat.record_stream(stream)
            h = StagedHandle(flat, host, index, copied)
        else:
            host.copy_(flat)
            h = StagedHandle(flat, host, index)
        self._queue.append(h)
        self._launch(block=False)
        return h

    def _launch(self, block: bool) -> None:
        """Start the reductions of the queued buffers whose copies are done, in order (``block``: wait for
        the copies instead of stopping at the first unfinished one)."""
        q = self._queue
        while q:
            h = q[0]
            if h.copied is not None and not h.copied.query():
                if not block:
                    return
                h.copied.synchronize()
            q.popleft()
            h.inner = self.sync.start(h.host, h.index)

    def _back(self, h: StagedHandle) -> None:
        if h.back:
            return
        h.flat.copy_(h.host, non_blocking=self.cuda)
        h.back = True
        self._free.setdefault((int(h.host.numel()), h.host.dtype), []).append(h.host)

    def test(self, h: StagedHandle) -> bool:
        """Start what is ready, advance ``h``'s reduction (never blocks); True once the reduction is complete.

        The result is copied back by :meth:`wait` only: some synchronisers
        finish their result there (``mpi`` and ``compressed`` divide by the
        world size in ``wait``).
        """
        self._launch(block=False)
        return h.inner is not None and bool(self.sync.test(h.inner))

    def wait(self, h: StagedHandle) -> None:
        """Complete ``h``: its copy, its reduction (sleeping), and the copy back (queued on the compute stream)."""
        while h.inner is None:
            self._launch(block=True)
        self.sync.wait(h.inner)
        self._back(h)

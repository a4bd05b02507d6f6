"""The collective sweep on GPU buffers (``--device cuda``): NCCL, host staging, CUDA-aware MPI.

nccl-tests (``src/common.cu``) times collectives on device buffers: each
timed iteration ends with the stream synchronised, algbw = bytes / time and
busbw = algbw x 2 (n - 1) / n for allreduce, and ``#wrong`` counts elements
that differ from the expected result after copying it to the host. On GPU
buffers this module gives the sweep:

* ``nccl``: ``torch.distributed.all_reduce`` over the NCCL backend on the
  device tensors (:class:`NCCLBackend`; NCCL refuses two ranks on one GPU,
  so with more ranks than GPUs on a host it is skipped with that reason);
* ``gloo``: the existing gloo baseline on the device tensors (gloo copies
  through host memory itself);
* hpcbench's algorithms and ``mpi``, **host-staged** (:func:`staged_runner`):
  the input copied to a pinned host buffer, reduced there, the result copied
  back, all inside the timed call (what a training step pays);
* ``mpi_direct``: ``MPI_Allreduce`` on the device pointers, only where
  mpi4py's MPI is CUDA-aware (:func:`hpcbench.runtime.gpuinfo.cuda_aware_mpi`;
  the PyPI ``mpich`` wheel is not, and the row is then skipped with that
  reason).

Every timed call ends with ``torch.cuda.synchronize()`` (nothing is timed
asynchronously). Only ``--op allreduce`` runs on GPU buffers.
"""

from __future__ import annotations

from typing import Callable

from hpcbench.bench.collectives.backends import Backend, Buffers, GlooBackend, MPIBackend
from hpcbench.runtime.registry import Registry

__all__ = ["NCCLBackend", "MPIDirectBackend", "GPU_BASELINES", "DEVICE_NATIVE", "to_device", "staged_runner",
           "synchronised"]


def to_device(b: Buffers, device: str) -> Buffers:
    """``b`` with its buffers as torch tensors on ``device`` (numpy inputs converted)."""
    import torch

    x = torch.as_tensor(b.x).to(device)
    out = x if b.out is b.x else torch.as_tensor(b.out).to(device)
    return Buffers(x, out, b.count, b.n, b.redop, b.dtype)


def synchronised(run: Callable[[], None]) -> Callable[[], None]:
    """``run`` followed by ``torch.cuda.synchronize()`` (the device has finished when the call returns)."""
    import torch

    def call():
        run()
        torch.cuda.synchronize()
    return call


def staged_runner(backend: Backend, op: str, b: Buffers, comm) -> Callable[[], None]:
    """``backend``'s ``op`` on pinned host copies of the device buffers ``b``: copy in, reduce, copy back.

    The host buffers are allocated once (pinned) and reused by every call;
    a backend without ``torch_buffers`` gets their numpy views.
    """
    import torch

    hx = torch.empty(b.x.shape, dtype=b.x.dtype, pin_memory=True)
    hout = hx if b.out is b.x else torch.empty(b.out.shape, dtype=b.out.dtype, pin_memory=True)
    view = (lambda t: t) if backend.torch_buffers or b.dtype == "bfloat16" else (lambda t: t.numpy())
    host = Buffers(view(hx), view(hout), b.count, b.n, b.redop, b.dtype)
    inner = backend.runner(op, host, comm)
    stream = torch.cuda.current_stream()

    def run():
        hx.copy_(b.x, non_blocking=True)
        stream.synchronize()
        inner()
        b.out.copy_(hout, non_blocking=True)
    return run


class NCCLBackend(Backend):
    """``torch.distributed`` over NCCL on the device tensors (the GPU baseline, as nccl-tests' ``all_reduce_perf``)."""

    name = "nccl"
    torch_buffers = True

    def __init__(self) -> None:
        self._started, self._group = False, None

    def start(self, comm, dtype: str) -> str | None:
        import torch.distributed as dist

        from hpcbench.runtime.device import node_local, visible_gpus
        from hpcbench.sync.base import Unavailable
        from hpcbench.sync.ddp import start_group

        if not dist.is_available() or not dist.is_nccl_available():
            return "nccl: this torch build has no NCCL; skipping"
        local_rank, local_size = node_local(comm)
        error = None
        if local_size > visible_gpus():
            error = (f"nccl: {local_size} ranks share {visible_gpus()} GPU(s) on one host; NCCL refuses two ranks "
                     f"on one GPU; skipping")
        from hpcbench.runtime.agreement import agree

        error = agree(comm, error)
        if error:
            return error
        try:
            self._started, self._group = start_group(comm, "nccl", "nccl")
        except Unavailable as exc:
            return f"{exc}; skipping"
        return None

    def stop(self) -> None:
        import torch.distributed as dist

        if self._group is not None and dist.is_initialized():
            dist.destroy_process_group(self._group)
        if self._started and dist.is_initialized():
            dist.destroy_process_group()

    def allreduce(self, b, comm):
        import torch.distributed as dist

        rop = {"sum": dist.ReduceOp.SUM, "avg": dist.ReduceOp.AVG, "max": dist.ReduceOp.MAX,
               "min": dist.ReduceOp.MIN}[b.redop]
        group = self._group

        def run():          # NCCL reduces in place: refresh from x, as out-of-place
            b.out.copy_(b.x)
            dist.all_reduce(b.out, op=rop, group=group)
        return run

    def reduce_scatter(self, b, comm):
        raise NotImplementedError("--device cuda runs allreduce only")

    allgather = bcast = reduce_scatter


class MPIDirectBackend(MPIBackend):
    """MPI's ``Allreduce`` on device pointers (``__cuda_array_interface__``), where MPI is CUDA-aware."""

    name = "mpi_direct"
    torch_buffers = True

    def start(self, comm, dtype: str) -> str | None:
        from hpcbench.runtime.gpuinfo import cuda_aware_mpi

        aware, why = cuda_aware_mpi()
        if aware != "yes":
            return f"mpi_direct: MPI is not known to be CUDA-aware ({why}); skipping"
        return None

    def allreduce(self, b, comm):
        from mpi4py import MPI

        op = {"sum": MPI.SUM, "max": MPI.MAX, "min": MPI.MIN, "avg": MPI.SUM}[b.redop]

        def run():
            comm.Allreduce(b.x, b.out, op=op)
            if b.redop == "avg":
                b.out.div_(b.n)
        return run


#: the baselines of ``--device cuda``, by ``--algorithms`` name (``mpi`` there is host-staged)
GPU_BASELINES: Registry[type[Backend]] = Registry("GPU baseline", {b.name: b for b in (
    MPIBackend, GlooBackend, NCCLBackend, MPIDirectBackend)})
#: implementations that take the device tensors themselves (the others are host-staged)
DEVICE_NATIVE = ("gloo", "nccl", "mpi_direct")

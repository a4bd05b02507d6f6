"""The implementations the collective benchmark compares, one class each, in a registry.

A backend turns one operation on one set of buffers into a callable that runs
it once. The baselines (:data:`BASELINES`: MPI's own collectives, gloo through
``torch.distributed``, Horovod) and the project's custom algorithms
(:class:`Custom`, one instance per algorithm name) share that interface, so
the sweep in :mod:`hpcbench.bench.collectives.job` is one loop over backends.
Adding a baseline is one class here and one line in :data:`BASELINES`.
"""

from __future__ import annotations

import os
import socket
from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any, Callable, ClassVar

import numpy as np

from hpcbench.bench.collectives.reference import as_dtype, pattern
from hpcbench.runtime.registry import Registry

__all__ = ["OPS", "REDOPS", "Buffers", "make_buffers", "Backend", "MPIBackend", "GlooBackend",
           "HorovodBackend", "Custom", "BASELINES", "custom_algorithms"]

OPS = ("allreduce", "reduce_scatter", "allgather", "bcast")
REDOPS = ("sum", "avg", "max", "min")


@dataclass
class Buffers:
    """Input ``x`` and output ``out`` of one operation at one size on this rank.

    ``count`` is the full buffer's element count (``out`` of allgather, ``x``
    of reduce_scatter); ``n`` the world size. For bcast, ``out`` is ``x``.
    """

    x: Any
    out: Any
    count: int
    n: int
    redop: str
    dtype: str


def make_buffers(op: str, dtype: str, redop: str, count: int, comm, torch_buffers: bool) -> Buffers:
    """Fresh buffers of rank ``comm.rank`` (inputs from :func:`~.reference.pattern`)."""
    import torch

    n, r = comm.size, comm.rank
    in_count = count if op in ("allreduce", "reduce_scatter", "bcast") else count // n
    is_torch = torch_buffers or dtype == "bfloat16"
    src = pattern(0 if op == "bcast" and r != 0 else r, in_count)
    if op == "bcast" and r != 0:
        src[:] = -7
    x = as_dtype(src, dtype, is_torch)
    if op == "allreduce":
        out = x.clone() if is_torch else np.empty_like(x)
    elif op in ("reduce_scatter", "allgather"):
        m = count // n if op == "reduce_scatter" else count
        out = torch.empty(m, dtype=x.dtype) if is_torch else np.empty(m, dtype=x.dtype)
    else:
        out = x
    return Buffers(x, out, count, n, redop, dtype)


class Backend(ABC):
    """One implementation of the four operations.

    Attributes
    ----------
    name : str
        Row label (``impl`` column).
    torch_buffers : bool
        Whether it needs torch tensors (else numpy arrays, except bfloat16).
    """

    name: ClassVar[str] = ""
    torch_buffers: ClassVar[bool] = False

    def start(self, comm, dtype: str) -> str | None:
        """Set up (collective); returns None when ready, else a note saying why it is skipped."""
        return None

    def stop(self) -> None:
        """Release what :meth:`start` set up."""

    def runner(self, op: str, b: Buffers, comm) -> Callable[[], None]:
        """A callable running ``op`` once on ``b`` (collective when called)."""
        return getattr(self, op)(b, comm)

    @abstractmethod
    def allreduce(self, b: Buffers, comm) -> Callable[[], None]: ...

    @abstractmethod
    def reduce_scatter(self, b: Buffers, comm) -> Callable[[], None]: ...

    @abstractmethod
    def allgather(self, b: Buffers, comm) -> Callable[[], None]: ...

    @abstractmethod
    def bcast(self, b: Buffers, comm) -> Callable[[], None]: ...


class MPIBackend(Backend):
    """MPI's own collectives (``Allreduce``, ``Reduce_scatter_block``, ``Allgather``, ``Bcast``)."""

    name = "mpi"

    def start(self, comm, dtype: str) -> str | None:
        return "mpi: MPI has no bfloat16 type; skipping" if dtype == "bfloat16" else None

    @staticmethod
    def _op(redop: str):
        from mpi4py import MPI

        return {"sum": MPI.SUM, "avg": MPI.SUM, "max": MPI.MAX, "min": MPI.MIN}[redop]

    @staticmethod
    def _finish(b: Buffers) -> Callable[[], None]:
        def finish():
            if b.redop == "avg":
                if b.dtype == "int64":
                    np.floor_divide(b.out, b.n, out=b.out)
                else:
                    np.divide(b.out, b.n, out=b.out)
        return finish

    def allreduce(self, b, comm):
        op, finish = self._op(b.redop), self._finish(b)

        def run():
            comm.Allreduce(b.x, b.out, op=op)
            finish()
        return run

    def reduce_scatter(self, b, comm):
        op, finish = self._op(b.redop), self._finish(b)

        def run():
            comm.Reduce_scatter_block(b.x, b.out, op=op)
            finish()
        return run

    def allgather(self, b, comm):
        return lambda: comm.Allgather(b.x, b.out)

    def bcast(self, b, comm):
        return lambda: comm.Bcast(b.x, root=0)


class GlooBackend(Backend):
    """``torch.distributed`` with gloo; rank and world from MPI, TCP store on rank 0's host."""

    name = "gloo"
    torch_buffers = True

    def start(self, comm, dtype: str) -> str | None:
        import torch.distributed as dist

        from hpcbench.runtime.hosts import single_host

        if dist.is_initialized():
            return None
        if "MASTER_ADDR" in os.environ and "MASTER_PORT" in os.environ:
            url = "env://"
        else:
            single = single_host(comm)
            addr = port = None
            if comm.rank == 0:
                with socket.socket() as s:
                    s.bind(("", 0))
                    port = s.getsockname()[1]
                addr = "127.0.0.1" if single else socket.gethostbyname(socket.gethostname())
            addr, port = comm.bcast((addr, port), root=0)
            url = f"tcp://{addr}:{port}"
        try:
            dist.init_process_group("gloo", init_method=url, rank=comm.rank, world_size=comm.size)
        except Exception as exc:  # noqa: BLE001 - reported and skipped
            return f"gloo: init failed ({type(exc).__name__}: {exc}); skipping"
        return None

    def stop(self) -> None:
        try:
            import torch.distributed as dist
            if dist.is_initialized():
                dist.destroy_process_group()
        except Exception:  # noqa: BLE001
            pass

    @staticmethod
    def _ops(b: Buffers):
        import torch.distributed as dist

        rop = {"sum": dist.ReduceOp.SUM, "avg": dist.ReduceOp.SUM, "max": dist.ReduceOp.MAX,
               "min": dist.ReduceOp.MIN}[b.redop]
        if b.redop != "avg":
            return dist, rop, (lambda t: None)
        if b.dtype == "int64":
            return dist, rop, (lambda t: t.div_(b.n, rounding_mode="floor"))
        return dist, rop, (lambda t: t.div_(b.n))

    def allreduce(self, b, comm):
        dist, rop, fin = self._ops(b)

        def run():          # gloo reduces in place: refresh from x, as out-of-place
            b.out.copy_(b.x)
            dist.all_reduce(b.out, op=rop)
            fin(b.out)
        return run

    def reduce_scatter(self, b, comm):
        dist, rop, fin = self._ops(b)
        chunks = list(b.x.chunk(b.n)) if b.count else [b.x[:0]] * b.n

        def run():
            dist.reduce_scatter(b.out, chunks, op=rop)
            fin(b.out)
        return run

    def allgather(self, b, comm):
        import torch.distributed as dist

        parts = list(b.out.chunk(b.n)) if b.count else [b.out[:0]] * b.n
        return lambda: dist.all_gather(parts, b.x)

    def bcast(self, b, comm):
        import torch.distributed as dist

        return lambda: dist.broadcast(b.x, src=0)


class HorovodBackend(Backend):
    """Horovod's torch collectives (``hvd.allreduce_``, ``reducescatter``, ``allgather``, ``broadcast_``)."""

    name = "horovod"
    torch_buffers = True

    def __init__(self) -> None:
        self.hvd = None

    def start(self, comm, dtype: str) -> str | None:
        try:
            import horovod.torch as hvd
        except Exception as exc:  # noqa: BLE001 - any import failure means "not available"
            return f"horovod: not installed (import horovod.torch failed: {exc}); skipping"
        hvd.init()
        if hvd.size() != comm.size:
            return f"horovod: world size {hvd.size()} != {comm.size}; skipping"
        self.hvd = hvd
        return None

    def stop(self) -> None:
        # Horovod's background thread calls MPI: it must end before MPI_Finalize
        if self.hvd is not None:
            self.hvd.shutdown()
            self.hvd = None

    def _op(self, redop):
        hvd = self.hvd
        return {"sum": hvd.Sum, "avg": hvd.Average, "max": hvd.Max, "min": hvd.Min}[redop]

    def allreduce(self, b, comm):
        hvd, op = self.hvd, self._op(b.redop)
        return lambda: hvd.allreduce_(b.out.copy_(b.x), op=op, name="bench")

    def reduce_scatter(self, b, comm):
        hvd, op = self.hvd, self._op(b.redop)
        return lambda: b.out.copy_(hvd.reducescatter(b.x, op=op, name="bench"))

    def allgather(self, b, comm):
        hvd = self.hvd
        return lambda: b.out.copy_(hvd.allgather(b.x, name="bench"))

    def bcast(self, b, comm):
        hvd = self.hvd
        return lambda: hvd.broadcast_(b.x, root_rank=0, name="bench")


class Custom(Backend):
    """hpcbench's own collectives (:mod:`hpcbench.collectives`), one instance per allreduce algorithm.

    Parameters
    ----------
    algorithm : str
        Allreduce algorithm name (``"auto"`` or a registered one); the other
        operations have one algorithm each (ring, ring, tree).
    link : Transport or None
        Link-model transport of ``--link``; None runs on the communicator.
    nonblocking : bool
        Run each operation as its nonblocking form followed by ``wait()``
        (``--nonblocking``: the path of overlapped gradient buckets).
    """

    def __init__(self, algorithm: str, link=None, nonblocking: bool = False) -> None:
        self.name = algorithm
        self.link = link
        self.nonblocking = nonblocking

    def _kw(self, comm) -> dict:
        return {"comm": comm} if self.link is None else {"transport": self.link}

    def allreduce(self, b, comm):
        import hpcbench.collectives as hc

        kw = self._kw(comm)
        if self.nonblocking:
            return lambda: hc.iallreduce(b.x, b.out, op=b.redop, algorithm=self.name, **kw).wait()
        return lambda: hc.allreduce(b.x, b.out, op=b.redop, algorithm=self.name, **kw)

    def reduce_scatter(self, b, comm):
        import hpcbench.collectives as hc

        kw = self._kw(comm)
        if self.nonblocking:
            return lambda: hc.ireduce_scatter(b.x, b.out, op=b.redop, **kw).wait()
        return lambda: hc.reduce_scatter(b.x, b.out, op=b.redop, **kw)

    def allgather(self, b, comm):
        import hpcbench.collectives as hc

        kw = self._kw(comm)
        if self.nonblocking:
            return lambda: hc.iallgather(b.x, b.out, **kw).wait()
        return lambda: hc.allgather(b.x, b.out, **kw)

    def bcast(self, b, comm):
        import hpcbench.collectives as hc

        kw = self._kw(comm)
        if self.nonblocking:
            return lambda: hc.ibcast(b.x, 0, **kw).wait()
        return lambda: hc.bcast(b.x, 0, **kw)


#: the baselines, by ``--algorithms`` name (the custom algorithms come from the core's registry)
BASELINES: Registry[type[Backend]] = Registry("baseline", {b.name: b for b in (MPIBackend, GlooBackend,
                                                                             HorovodBackend)})


def custom_algorithms(op: str) -> list[str]:
    """Custom implementations benchmarked for ``op``."""
    if op == "allreduce":
        from hpcbench.collectives.algorithms import names
        return ["auto", *names()]
    return {"reduce_scatter": ["ring"], "allgather": ["ring"], "bcast": ["tree"]}[op]

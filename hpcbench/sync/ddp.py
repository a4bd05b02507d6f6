"""``ddp``: torch's ``DistributedDataParallel`` over gloo (the PyTorch baseline)."""

from __future__ import annotations

import socket

from pydantic import Field

from hpcbench.sync.base import Synchroniser, SyncConfig, Unavailable

__all__ = ["DDPSync", "start_group"]


def start_group(comm, backend: str, who: str = "ddp"):
    """A torch.distributed process group of ``backend`` over the ranks of ``comm`` (collective).

    Rank and world size come from MPI; rank 0 picks a free TCP port and
    broadcasts its address (``127.0.0.1`` when every rank is on its host).
    When a default group is running already (another synchroniser of the
    job started it) and its backend differs, a new group of ``backend`` is
    made beside it (``dist.new_group``), so that ``ddp`` (gloo) and ``nccl``
    run side by side in one job.

    Parameters
    ----------
    comm : mpi4py.MPI.Comm
    backend : {"gloo", "nccl"}
    who : str
        The synchroniser's name, for messages.

    Returns
    -------
    (bool, ProcessGroup or None)
        Whether this call started the default group, and the group to use
        (None: the default group).

    Raises
    ------
    Unavailable
        torch.distributed or the backend cannot start (the message gives the cause).
    """
    import torch.distributed as dist

    from hpcbench.runtime.hosts import single_host

    if not dist.is_available():
        raise Unavailable(f"{who}: torch.distributed is not available in this torch build")
    if dist.is_initialized():
        if dist.get_backend() == backend:
            return False, None
        try:
            return False, dist.new_group(backend=backend)
        except Exception as exc:  # noqa: BLE001 - reported by name
            raise Unavailable(f"{who}: {backend} group did not start ({type(exc).__name__}: {exc})") from exc
    local = single_host(comm)
    where = None
    if comm.rank == 0:
        with socket.socket() as s:
            s.bind(("", 0))
            where = ("127.0.0.1" if local else socket.gethostbyname(socket.gethostname()),
                     s.getsockname()[1])
    host, port = comm.bcast(where, root=0)
    try:
        dist.init_process_group(backend, init_method=f"tcp://{host}:{port}", rank=comm.rank,
                                world_size=comm.size)
    except Exception as exc:  # noqa: BLE001 - reported by name
        raise Unavailable(f"{who}: {backend} did not start ({type(exc).__name__}: {exc})") from exc
    return True, None


class DDPSync(Synchroniser):
    """torch ``DistributedDataParallel`` over gloo (Li et al., VLDB 2020), buckets of ``bucket_bytes``.

    DDP buckets the gradients in reverse parameter order and allreduces each
    bucket (gloo's ring, mean over workers) as backward fills it, waiting for
    all of them at the end of backward. A communication hook sees each local
    bucket before its allreduce (for the local gradient norm), then calls
    DDP's default ``allreduce_hook``. gloo's TCP sockets do not go through
    hpcbench's transports: a modelled link does not apply. On a GPU the
    model is wrapped with ``device_ids=[its GPU]`` and gloo reduces the CUDA
    buckets itself (through host memory).
    """

    name = "ddp"
    averages = "wrapped"
    emulates = False
    cost_model = "ring"
    uses_transport = False
    sees_local_buckets = True

    #: torch.distributed backend
    backend = "gloo"

    class Config(SyncConfig):
        """DDP's own option beside the bucket size (the job's ``bucket_mb``)."""

        gradient_as_bucket_view: bool = Field(
            False, description="DDP's gradient_as_bucket_view: .grad are views of the buckets (no copy into them); "
                               "off by default, as PyTorch's DDP benchmark runs it")

    def __init__(self, comm, transport=None, config=None, **facts) -> None:
        super().__init__(comm, transport, config, **facts)
        self._check()
        self._started, self._group = start_group(comm, self.backend, self.name)

    def _check(self) -> None:
        """Raise :class:`Unavailable` when the backend cannot run on this rank's device."""

    def wrap(self, model, optimizer, on_bucket):
        from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
        from torch.nn.parallel import DistributedDataParallel

        ids = [self.device.index] if self.device.is_cuda else None
        ddp = DistributedDataParallel(model, device_ids=ids, bucket_cap_mb=self.bucket_bytes / 2**20,
                                      process_group=self._group,
                                      gradient_as_bucket_view=self.config.gradient_as_bucket_view)

        def hook(state, bucket):
            on_bucket(bucket.buffer())
            return default_hooks.allreduce_hook(state, bucket)

        ddp.register_comm_hook(None, hook)
        return ddp, optimizer

    def close(self):
        import torch.distributed as dist

        if self._group is not None and dist.is_initialized():
            dist.destroy_process_group(self._group)
        if self._started and dist.is_initialized():
            dist.destroy_process_group()


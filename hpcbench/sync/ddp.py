"""``ddp``: torch's ``DistributedDataParallel`` over gloo (the PyTorch baseline)."""

from __future__ import annotations

import socket

from hpcbench.sync.base import Synchroniser, Unavailable

__all__ = ["DDPSync", "start_gloo"]


def start_gloo(comm) -> bool:
    """Start torch.distributed's gloo process group on the ranks of ``comm`` (collective).

    Rank and world size come from MPI; rank 0 picks a free TCP port and
    broadcasts its address (``127.0.0.1`` when every rank is on its host).

    Returns
    -------
    bool
        True when this call started the group (False: one was running already).

    Raises
    ------
    Unavailable
        torch.distributed or gloo cannot start (the message gives the cause).
    """
    import torch.distributed as dist

    from hpcbench.runtime.hosts import single_host

    if not dist.is_available():
        raise Unavailable("ddp: torch.distributed is not available in this torch build")
    if dist.is_initialized():
        return False
    local = single_host(comm)
    where = None
    if comm.rank == 0:
        with socket.socket() as s:
            s.bind(("", 0))
            where = ("127.0.0.1" if local else socket.gethostbyname(socket.gethostname()),
                     s.getsockname()[1])
    host, port = comm.bcast(where, root=0)
    try:
        dist.init_process_group("gloo", init_method=f"tcp://{host}:{port}", rank=comm.rank,
                                world_size=comm.size)
    except Exception as exc:  # noqa: BLE001 - reported by name
        raise Unavailable(f"ddp: gloo did not start ({type(exc).__name__}: {exc})") from exc
    return True


class DDPSync(Synchroniser):
    """torch ``DistributedDataParallel`` over gloo (Li et al., VLDB 2020), buckets of ``bucket_bytes``.

    DDP buckets the gradients in reverse parameter order and allreduces each
    bucket (gloo's ring, mean over workers) as backward fills it, waiting for
    all of them at the end of backward. A communication hook sees each local
    bucket before its allreduce (for the local gradient norm), then calls
    DDP's default ``allreduce_hook``. gloo's TCP sockets do not go through
    hpcbench's transports: a modelled link does not apply.
    """

    name = "ddp"
    averages = "wrapped"
    emulates = False
    cost_model = "ring"
    uses_transport = False
    sees_local_buckets = True

    def __init__(self, comm, transport=None, config=None, **facts) -> None:
        super().__init__(comm, transport, config, **facts)
        self._started = start_gloo(comm)

    def wrap(self, model, optimizer, on_bucket):
        from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
        from torch.nn.parallel import DistributedDataParallel

        ddp = DistributedDataParallel(model, bucket_cap_mb=self.bucket_bytes / 2**20)

        def hook(state, bucket):
            on_bucket(bucket.buffer())
            return default_hooks.allreduce_hook(state, bucket)

        ddp.register_comm_hook(None, hook)
        return ddp, optimizer

    def close(self):
        import torch.distributed as dist

        if self._started and dist.is_initialized():
            dist.destroy_process_group()


"""``nccl``: torch ``DistributedDataParallel`` over NCCL, the GPU baseline."""

from __future__ import annotations

from hpcbench.sync.base import Unavailable
from hpcbench.sync.ddp import DDPSync

__all__ = ["NCCLSync"]


class NCCLSync(DDPSync):
    """torch ``DistributedDataParallel`` over NCCL (GPU buckets of ``bucket_bytes``, 25 MiB by default).

    As PyTorch's own DDP benchmark (``benchmarks/distributed/ddp/benchmark.py``:
    ``init_process_group("nccl")``, one GPU per process by its local rank,
    ``DistributedDataParallel(model, device_ids=[local_rank])`` with the
    default ``bucket_cap_mb=25``), with the job's ``bucket_mb`` (25 unless
    set). NCCL moves device memory itself (NVLink, PCIe, InfiniBand), so
    neither hpcbench's transports nor a modelled link apply, and it does not
    run without a GPU.

    Raises
    ------
    Unavailable
        The rank computes on the CPU (``device: cpu``, or ``auto`` without a
        GPU); torch has no NCCL; or two ranks of a host share one GPU (NCCL
        refuses a communicator with two ranks on one device: "Duplicate GPU
        detected"). The training runner skips it with that reason.
    """

    name = "nccl"
    backend = "nccl"

    def _check(self) -> None:
        import torch.distributed as dist

        if not self.device.is_cuda:
            raise Unavailable("nccl: needs device: cuda (this rank computes on the CPU)")
        if self.device.shares_gpu():
            raise Unavailable(f"nccl: {self.device.local_size} ranks on this host share {self.device.gpus} GPU(s); "
                              f"NCCL refuses two ranks on one GPU (run one rank per GPU)")
        if not dist.is_available() or not dist.is_nccl_available():
            raise Unavailable("nccl: this torch build has no NCCL")

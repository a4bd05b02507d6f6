"""``horovod``: Horovod's ``DistributedOptimizer`` (the baseline KungFu compares against)."""

from __future__ import annotations

import os

from hpcbench.sync.base import Synchroniser, Unavailable

__all__ = ["HorovodSync"]


class HorovodSync(Synchroniser):
    """Horovod's ``DistributedOptimizer`` over MPI (Sergeev and Del Balso 2018), tensor fusion of ``bucket_bytes``.

    Horovod allreduces each gradient from an autograd hook as backward
    produces it; its background thread fuses ready tensors into buffers of up
    to ``HOROVOD_FUSION_THRESHOLD`` bytes (set here from ``bucket_bytes``
    before ``hvd.init``; Horovod's own default is 64 MiB) and reduces them
    with MPI (mean over workers); ``optimizer.step()`` waits for them. Horovod
    exposes no hook on its fused buffers, so the local gradient norm is not
    recorded (NaN). MPI's channels do not go through a modelled link.
    """

    name = "horovod"
    averages = "wrapped"
    emulates = False
    cost_model = "auto"
    uses_transport = False

    def __init__(self, comm, transport=None, config=None, **facts) -> None:
        super().__init__(comm, transport, config, **facts)
        try:
            import horovod.torch as hvd
        except Exception as exc:  # noqa: BLE001 - ImportError, or a wheel built for another torch
            raise Unavailable(f"horovod: not usable (import horovod.torch failed: {type(exc).__name__}: "
                              f"{exc}); build it with scripts/build_horovod.sh") from exc
        os.environ.setdefault("HOROVOD_FUSION_THRESHOLD", str(self.bucket_bytes))
        hvd.init(comm=comm)
        if hvd.size() != comm.size:
            raise Unavailable(f"horovod: world size {hvd.size()} differs from the job's {comm.size}")
        self.hvd = hvd

    def wrap(self, model, optimizer, on_bucket):
        hvd = self.hvd
        hvd.broadcast_parameters(model.state_dict(), root_rank=0)
        opt = hvd.DistributedOptimizer(optimizer, named_parameters=model.named_parameters(), op=hvd.Average)
        return model, opt

    def close(self):
        self.hvd.shutdown()


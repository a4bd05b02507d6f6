"""``compressed``: any hpcbench compressor with error feedback, through the compressed collectives."""

from __future__ import annotations

import torch

from hpcbench.collectives.compressed import icompressed_allreduce
from hpcbench.compress import registry
from hpcbench.compress.memory import ErrorFeedback
from hpcbench.runtime.wait import Backoff
from hpcbench.sync.base import Synchroniser, SyncOptions

__all__ = ["CompressedSync", "SYNCHRONISER"]


class CompressedSync(Synchroniser):
    """Compressed allreduce of each bucket with error feedback (Seide et al. 2014; Stich et al. 2018).

    Per bucket ``b`` and step: ``acc = g_b + e_b``, ``payload = C(acc)``,
    ``e_b = acc - D(payload)`` (:class:`hpcbench.compress.memory.ErrorFeedback`,
    keyed by bucket), and the bucket becomes ``sum over ranks of D(payload_r)
    / p`` (:func:`hpcbench.collectives.compressed.icompressed_allreduce`,
    whose communication pattern follows the compressor's kind). With the
    ``none`` compressor this is a dense ring allreduce. The compressed
    collectives progress inside ``test``/``wait``: the runner tests the open
    buckets from its gradient hooks. No alpha-beta model: the payload size
    depends on the compressor.
    """

    name = "compressed"

    def __init__(self, comm, transport=None, options: SyncOptions = SyncOptions()) -> None:
        super().__init__(comm, transport, options)
        o = self.options
        self.compressor = registry.build(o.compressor, compress_ratio=o.compress_ratio,
                                         seed=o.seed * 1009 + comm.rank)
        self.memory = ErrorFeedback()

    def start(self, flat, index):
        flat = torch.as_tensor(flat)      # an emulated run's numpy bucket: a tensor sharing its memory
        return flat, icompressed_allreduce(flat, f"bucket{index}", self.compressor, self.memory,
                                           transport=self.transport, comm=self.comm, out=flat)

    def test(self, handle):
        return handle[1].test()

    def wait(self, handle):
        flat, req = handle
        req.wait(Backoff(spin=16, max_s=5e-4))
        if self.comm.size > 1:
            flat /= self.comm.size


SYNCHRONISER = CompressedSync

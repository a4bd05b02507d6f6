"""``compressed``: any hpcbench compressor with error feedback, through the compressed collectives.

The compressors and the compressed collectives are torch code: they are
imported when a ``compressed`` synchroniser is built, not with this module
(the registry imports every synchroniser's module to read its config section).
"""

from __future__ import annotations

from typing import Annotated

from pydantic import BeforeValidator, Field

from hpcbench.compress.config import CompressorConfig
from hpcbench.runtime.wait import Backoff
from hpcbench.sync.base import Synchroniser, SyncConfig

__all__ = ["CompressedSync"]


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

    class Config(SyncConfig):
        """The compressor (``compressor: topk`` is short for ``compressor: {name: topk}``)."""

        compressor: Annotated[CompressorConfig, BeforeValidator(lambda v: {"name": v} if isinstance(v, str) else v)] \
            = Field(CompressorConfig(), description="compressor of hpcbench.compress with its ratio and options")

    name = "compressed"

    def __init__(self, comm, transport=None, config=None, **facts) -> None:
        super().__init__(comm, transport, config, **facts)
        import torch

        from hpcbench.collectives.compressed import icompressed_allreduce
        from hpcbench.compress.memory import ErrorFeedback

        self._as_tensor, self._allreduce = torch.as_tensor, icompressed_allreduce
        self.compressor = self.config.compressor.build(seed=self.seed * 1009 + comm.rank)
        self.memory = ErrorFeedback()

    @classmethod
    def adjusts_ratio(cls, config) -> bool:
        """A compressor that takes a ratio (top-k, threshold-v, random-k...) can change it between steps."""
        if config.compressor.name == "none":
            return False
        from hpcbench.compress.registry import REGISTRY

        return bool(REGISTRY[config.compressor.name].takes_ratio)

    def use_ratio(self, ratio: float) -> None:
        """The compressor keeps ``ratio`` of each bucket's elements from the next start on; its other state (a
        threshold's adaptation) and the error feedback are kept."""
        from hpcbench.compress.base import check_ratio

        if not self.adjusts_ratio(self.config):
            super().use_ratio(ratio)
        self.compressor.compress_ratio = check_ratio(ratio)

    @property
    def kept_fraction(self) -> float:
        return float(getattr(self.compressor, "compress_ratio", 1.0))

    def start(self, flat, index):
        flat = self._as_tensor(flat)      # an emulated run's numpy bucket: a tensor sharing its memory
        return flat, self._allreduce(flat, f"bucket{index}", self.compressor, self.memory,
                                     transport=self.transport, comm=self.comm, out=flat)

    def test(self, handle):
        return handle[1].test()

    def wait(self, handle):
        flat, req = handle
        req.wait(Backoff(spin=16, max_s=5e-4))
        if self.comm.size > 1:
            flat /= self.comm.size


"""``sma``: KungFu's synchronous model averaging, ``v <- (1 - alpha) v + alpha mean(v)``."""

from __future__ import annotations

from pydantic import Field, field_validator

from hpcbench.collectives import iallreduce
from hpcbench.sync.base import Synchroniser, SyncConfig, allreduce_time

__all__ = ["SMASync"]


class SMASync(Synchroniser):
    """Synchronous model averaging (KungFu, Mai et al. OSDI'20; Lin et al. 2018's local SGD with averaging).

    Every step each worker mixes its model with the mean model of all
    workers, ``v <- (1 - alpha) v + alpha mean_r(v_r)`` (``alpha`` 0.1 as
    KungFu's ``SynchronousAveragingOptimizer``), then applies its own
    gradient, computed at the unmixed ``v``. As in KungFu, the allreduce of
    the model starts when the step starts and runs during forward and
    backward (the model does not change until the optimizer step), so it
    overlaps compute. The mean is a deterministic hpcbench allreduce
    (``algorithm``), so replicas with equal models stay bitwise equal.
    """

    class Config(SyncConfig):
        """KungFu's SMA: the mixing weight and the allreduce of the models."""

        alpha: float = Field(0.1, gt=0.0, le=1.0, description="mixing weight (KungFu's 0.1)")
        algorithm: str = Field("auto", description="hpcbench allreduce algorithm of the models (auto: by size)")

        @field_validator("algorithm")
        @classmethod
        def _algorithm(cls, v):
            from hpcbench.collectives.algorithms import ALGORITHMS, names

            names()     # loads the registry
            return v if v == "auto" else ALGORITHMS.check(v)

    name = "sma"
    averages = "models"
    cost_model = "auto"     # the entry's algorithm: message_time reads its config

    @classmethod
    def message_time(cls, config, nbytes, world_size, alpha_s, beta_s_per_byte, ranks_per_host=()):
        """The allreduce of the model with the entry's ``algorithm``."""
        return allreduce_time(config.algorithm, nbytes, world_size, alpha_s, beta_s_per_byte, ranks_per_host)

    def start(self, flat, index):
        kw = {"transport": self.transport} if self.transport is not None else {"comm": self.comm}
        return iallreduce(flat, flat, op="avg", algorithm=self.config.algorithm, deterministic=True,
                          name="sma", **kw)

    def test(self, handle):
        return handle.test()

    def wait(self, handle):
        handle.wait()

    def mix(self, params, communicated, step):
        a = self.config.alpha
        params.mul_(1.0 - a).add_(communicated, alpha=a)

    def mix_memory_s(self, profile):
        """A scale and an axpy over the model."""
        return profile.scale_s + profile.axpy_s


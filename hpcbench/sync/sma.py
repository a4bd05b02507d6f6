"""``sma``: KungFu's synchronous model averaging, ``v <- (1 - alpha) v + alpha mean(v)``."""

from __future__ import annotations

from hpcbench.collectives import iallreduce
from hpcbench.sync.base import Synchroniser, SyncOptions

__all__ = ["SMASync", "SYNCHRONISER"]


class SMASync(Synchroniser):
    """Synchronous model averaging (KungFu, Mai et al. OSDI'20; Lin et al. 2018's local SGD with averaging).

    Every step each worker mixes its model with the mean model of all
    workers, ``v <- (1 - alpha) v + alpha mean_r(v_r)`` (``alpha`` 0.1 as
    KungFu's ``SynchronousAveragingOptimizer``), then applies its own
    gradient, computed at the unmixed ``v``. As in KungFu, the allreduce of
    the model starts when the step starts and runs during forward and
    backward (the model does not change until the optimizer step), so it
    overlaps compute. The mean is a deterministic hpcbench allreduce
    (``options.algorithm``), so replicas with equal models stay bitwise equal.
    """

    name = "sma"
    averages = "models"
    cost_model = "auto"     # the instance's: options.algorithm

    def __init__(self, comm, transport=None, options: SyncOptions = SyncOptions()) -> None:
        super().__init__(comm, transport, options)
        if not 0.0 < options.alpha <= 1.0:
            raise ValueError(f"sma alpha must be in (0, 1], got {options.alpha!r}")
        self.cost_model = options.algorithm

    def start(self, flat, index):
        kw = {"transport": self.transport} if self.transport is not None else {"comm": self.comm}
        return iallreduce(flat, flat, op="avg", algorithm=self.options.algorithm, deterministic=True,
                          name="sma", **kw)

    def test(self, handle):
        return handle.test()

    def wait(self, handle):
        handle.wait()

    def mix(self, params, communicated, step):
        a = self.options.alpha
        params.mul_(1.0 - a).add_(communicated, alpha=a)


SYNCHRONISER = SMASync

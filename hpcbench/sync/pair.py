"""``pair``: AD-PSGD pair averaging with a random peer each step."""

from __future__ import annotations

from hpcbench.collectives import ipair_average
from hpcbench.sync.base import Synchroniser

__all__ = ["PairSync", "SYNCHRONISER"]


class PairSync(Synchroniser):
    """Pair averaging with a random peer (AD-PSGD, Lian et al. ICML 2018; KungFu's ``PairAveragingOptimizer``).

    Every step the workers are matched in random pairs (one seeded perfect
    matching per step, :func:`hpcbench.collectives.pair_schedule`; with an
    odd world size one worker sits out); each replaces its model by the mean
    of its own and its peer's, then applies its own gradient computed at its
    unaveraged model. AD-PSGD is asynchronous (a worker averages with a peer
    whenever it is ready); this is its synchronous, step-aligned form, which
    makes runs reproducible. The exchange starts with the step and overlaps
    forward and backward. Alpha-beta cost: one message of the model each way
    (``alpha + m beta``).
    """

    name = "pair"
    averages = "models"
    cost_model = "pair"

    def start(self, flat, index):
        kw = {"transport": self.transport} if self.transport is not None else {"comm": self.comm}
        return ipair_average(flat, index, seed=self.options.seed, name="pair", **kw)

    def test(self, handle):
        return handle.test()

    def wait(self, handle):
        handle.wait()

    def mix(self, params, communicated, step):
        params.copy_(communicated)


SYNCHRONISER = PairSync

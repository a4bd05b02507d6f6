"""``pair``: AD-PSGD pair averaging with a random peer each step."""

from __future__ import annotations

from hpcbench.collectives import ipair_average
from hpcbench.sync.base import Synchroniser

__all__ = ["PairSync"]


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
    (``alpha + m beta``, :meth:`message_time`).
    """

    name = "pair"
    averages = "models"
    cost_model = "pair"     # its own: message_time below

    @classmethod
    def message_time(cls, config, nbytes, world_size, alpha_s, beta_s_per_byte, ranks_per_host=()):
        """One exchange of ``nbytes`` with one peer, both ways at once: ``alpha + nbytes beta`` (0 when ``world_size == 1``).

        With several hosts (``ranks_per_host``) the same, one level: the peers are drawn at random, so neither which
        exchanges stay inside a host (free there) nor how many ranks of a host cross at once (sharing its card) is
        known; this can under- or over-predict a step."""
        if world_size == 1 or nbytes == 0:
            return 0.0
        return alpha_s + nbytes * beta_s_per_byte

    def start(self, flat, index):
        kw = {"transport": self.transport} if self.transport is not None else {"comm": self.comm}
        return ipair_average(flat, index, seed=self.seed, name="pair", **kw)

    def test(self, handle):
        return handle.test()

    def wait(self, handle):
        handle.wait()

    def mix(self, params, communicated, step):
        params.copy_(communicated)

    def mix_memory_s(self, profile):
        """A copy of the model."""
        return profile.copy_s


"""Uniform random participant selection (FedAvg's and FedScale's default)."""

from __future__ import annotations

import numpy as np

from hpcbench.fl.contracts import Selector

__all__ = ["RandomSelector"]


class RandomSelector(Selector):
    """Pick participants uniformly at random, without replacement, among online clients.

    The draw uses a generator seeded from ``(seed, round)``, so the choice is
    reproducible and independent of the world size. Feedback is ignored.
    """

    def select(self, round_: int, online: np.ndarray, count: int) -> np.ndarray:
        """Up to ``count`` distinct client ids from ``online`` (int64, sorted ascending)."""
        rng = np.random.default_rng([self.seed, round_, 0x5E1EC7])
        if count >= len(online):
            return np.sort(online.astype(np.int64))
        return np.sort(rng.choice(online, size=count, replace=False).astype(np.int64))

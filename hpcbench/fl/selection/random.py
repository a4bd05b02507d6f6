"""Uniform random participant selection (FedAvg's and FedScale's default)."""

from __future__ import annotations

import numpy as np

__all__ = ["RandomSelector"]


class RandomSelector:
    """Pick participants uniformly at random, without replacement, among online clients.

    The draw uses a generator seeded from ``(seed, round)``, so every rank
    makes the same choice without communicating.

    Parameters
    ----------
    cfg : hpcbench.fl.config.FLConfig
        Uses ``seed``.
    """

    def __init__(self, cfg) -> None:
        self.seed = int(cfg.seed)

    def select(self, round_: int, online: np.ndarray, count: int) -> np.ndarray:
        """Up to ``count`` distinct client ids from ``online`` (int64, sorted ascending)."""
        rng = np.random.default_rng([self.seed, round_, 0x5E1EC7])
        if count >= len(online):
            return np.sort(online.astype(np.int64))
        return np.sort(rng.choice(online, size=count, replace=False).astype(np.int64))

    def feedback(self, round_: int, client_ids: np.ndarray, **stats) -> None:
        """Per-client results of a round (unused by random selection; Oort uses them)."""

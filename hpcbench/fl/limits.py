"""Bounds on what a federated job may ask for: total training work, and the memory of its client split.

Both are checked from the config alone, before anything is loaded:
:data:`MAX_SAMPLE_GRADIENTS` by :class:`hpcbench.fl.config.FLConfig`'s
validator, :func:`memory_need` by the job lifecycle against the node's
available memory (:mod:`hpcbench.runtime.memory`).
"""

from __future__ import annotations

import math

from hpcbench.runtime.memory import MemoryNeed

__all__ = ["MAX_SAMPLE_GRADIENTS", "sample_gradients", "memory_need"]

#: Most per-sample gradient computations a job may ask for: rounds x clients per round x
#: local_steps x batch_size. The digits job trains about 77,000 samples per second at -np 4 on
#: 2 cores (208,000 in 2.7 s), so 1e12 is about five months of it: any more is a typo, not a run.
MAX_SAMPLE_GRADIENTS = 10**12

#: bytes per registered client besides its sample indices: CSR offset (8) and the client
#: registry's per-client trace rows and sizes (4 int64 columns)
_PER_CLIENT_BYTES = 8 + 4 * 8


def sample_gradients(cfg) -> int:
    """rounds x clients trained per round (sync: ceil(participants x overcommitment); async: K) x local_steps x batch_size."""
    if cfg.mode == "async":
        per_round = cfg.asynchronous.buffer_size or cfg.participants
    else:
        per_round = math.ceil(cfg.participants * cfg.overcommitment)
    return cfg.rounds * per_round * cfg.local_steps * cfg.batch_size


def memory_need(cfg) -> MemoryNeed:
    """One rank's memory for the client split, which every rank builds (int32 sample indices per client).

    ``dataset.num_clients x (dataset.samples_per_client x 4 + 40)`` bytes for
    the sampled split; the disjoint split holds at most the training set once.
    """
    data = cfg.dataset
    per_client = (data.samples_per_client or 0) * 4 + _PER_CLIENT_BYTES
    keys = f"dataset.num_clients={data.num_clients}"
    if data.samples_per_client:
        keys += f", dataset.samples_per_client={data.samples_per_client}"
    return MemoryNeed(data.num_clients * per_client, keys + " (the client split every rank holds)")

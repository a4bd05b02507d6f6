"""Bounds on what a federated job may ask for: total training work, and the memory of its client split.

Both are checked from the config alone, before anything is loaded:
:data:`MAX_SAMPLE_GRADIENTS` by :class:`hpcbench.fl.config.FLConfig`'s
validator, :func:`memory_need` by the job lifecycle against the node's
available memory (:mod:`hpcbench.runtime.memory`).
"""

from __future__ import annotations

import math

from hpcbench.runtime.memory import MemoryNeed

__all__ = ["MAX_SAMPLE_GRADIENTS", "sample_gradients", "memory_need", "round_updates_error"]

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


def round_updates_error(cfg, num_parameters: int, available: int, world_size: int = 1) -> str | None:
    """The refusal of a job whose one round of client updates cannot fit in the aggregator's memory.

    The aggregator collects a round's updates in one float32 block of
    ``clients x num_parameters x 4`` bytes (:class:`hpcbench.fl.executors.block.ResultBlock`):
    ``clients`` is ``ceil(participants x overcommitment)`` for ``mode: sync`` and
    ``asynchronous.concurrency`` (default ``participants``) for ``mode: async``. With
    ``client_updates: summed`` it holds one float64 sum per executor instead
    (``max(1, world_size - 1) x num_parameters x 8`` bytes; :mod:`hpcbench.fl.executors.sums`).
    Checked once the model is built (its size is not known from the config alone), on every
    rank alike.

    Parameters
    ----------
    cfg : FLConfig
    num_parameters : int
        The model's parameter count.
    available : int
        Bytes available on the node (:func:`hpcbench.runtime.memory.available_bytes`).
    world_size : int
        Ranks of the job (``client_updates: summed``: one sum per executor).

    Returns
    -------
    str or None
        ``"participants=1300, overcommitment=1.0: a round's 1300 updates of 6,497,162 parameters
        need 33.8 GB on the aggregator; 22.1 GB available ..."``, or None when they fit.
    """
    from hpcbench.runtime.memory import format_bytes

    if cfg.mode == "async":
        clients = cfg.asynchronous.concurrency or cfg.participants
        keys = f"asynchronous.concurrency={clients}"
    else:
        clients = math.ceil(cfg.participants * cfg.overcommitment)
        keys = f"participants={cfg.participants}, overcommitment={cfg.overcommitment}"
    if cfg.mode != "async" and cfg.client_updates == "summed":
        executors = max(1, int(world_size) - 1)
        need = executors * int(num_parameters) * 8
        what = f"client_updates=summed: one sum per executor, {executors} executors"
        remedy = "fewer ranks, or a smaller model"
    else:
        need = clients * int(num_parameters) * 4
        what = f"{keys}: a round's {clients} updates"
        remedy = "fewer clients per round, client_updates: summed, or a smaller model"
    if need <= available:
        return None
    return (f"memory: {what} of {num_parameters:,} parameters (model.name {cfg.model.name!r}) need "
            f"{format_bytes(need)} on the aggregator; {format_bytes(available)} available ({remedy})")

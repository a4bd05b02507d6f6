"""Config section of FedBuff's asynchronous rounds (``mode: async``)."""

from __future__ import annotations

from pydantic import Field

from hpcbench.runtime.config import Strict

__all__ = ["AsyncConfig"]


class AsyncConfig(Strict):
    """FedBuff (Nguyen et al., "Federated Learning with Buffered Asynchronous
    Aggregation", AISTATS 2022) settings, read only when ``mode: async``.

    ``concurrency`` clients train at once (default: ``ceil(participants *
    overcommitment)``, the number a synchronous round has in flight);
    ``buffer_size`` is FedBuff's K, the client updates summed into one server
    update (default: ``participants``, the updates a synchronous round
    aggregates); an update staler than ``max_staleness`` model versions is
    dropped and recorded. In async mode ``rounds`` counts server updates
    (model versions) and ``eval_interval`` is in versions.
    ``arrival_interval_s`` staggers the clients a refill starts, as FedScale's
    asynchronous example did with ``arrival_interval`` (each sampled client
    checks in that many seconds after the previous one, from the selection
    time); the default 0 starts them at once, as FedBuff.
    """

    concurrency: int | None = Field(None, ge=1, le=1_000_000,
                                    description="clients training at once (default ceil(participants x "
                                                "overcommitment))")
    buffer_size: int | None = Field(None, ge=1, le=1_000_000,
                                    description="FedBuff's K: client updates per server update "
                                                "(default participants)")
    max_staleness: int = Field(5, ge=0, le=1_000_000,
                               description="updates more than this many versions stale are dropped")
    arrival_interval_s: float = Field(0.0, ge=0.0, le=1e6,
                                      description="the k-th client of a refill starts k x this many virtual "
                                                  "seconds after it (FedScale's arrival_interval: clients check "
                                                  "in at a constant rate); 0: at once (FedBuff)")

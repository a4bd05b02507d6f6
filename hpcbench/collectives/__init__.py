"""The communication core: custom and asynchronous collectives over mpi4py point-to-point.

See :mod:`hpcbench.collectives.api` (collectives), :mod:`hpcbench.collectives.progress`
(nonblocking requests) and :mod:`hpcbench.collectives.averaging` (decentralised averaging).
"""

from hpcbench.collectives.api import (CROSSOVER, allgather, allreduce, bcast, choose_algorithm,
                                      iallgather, iallreduce, ibcast, ireduce_scatter,
                                      reduce_scatter)
from hpcbench.collectives.averaging import ipair_average, pair_average, pair_schedule, sma_average
from hpcbench.collectives.progress import Request, progress_mode
from hpcbench.collectives.transport import P2PRequest, Transport

__all__ = ["CROSSOVER", "P2PRequest", "Request", "Transport", "allgather", "allreduce", "bcast",
           "choose_algorithm", "iallgather", "iallreduce", "ibcast", "ireduce_scatter",
           "ipair_average", "pair_average", "pair_schedule", "progress_mode", "reduce_scatter", "sma_average",
           "algorithm_names"]


def algorithm_names() -> list[str]:
    """Names of the registered allreduce algorithms."""
    from hpcbench.collectives.algorithms import names
    return names()

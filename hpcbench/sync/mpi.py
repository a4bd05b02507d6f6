"""``mpi``: MPI's own nonblocking allreduce (``MPI_Iallreduce``) of each gradient bucket."""

from __future__ import annotations

import numpy as np
from mpi4py import MPI

from hpcbench.runtime.wait import Backoff, sleep_wait
from hpcbench.sync.base import Synchroniser

__all__ = ["MPISync"]


class MPISync(Synchroniser):
    """MPI's own allreduce (``MPI_Iallreduce``, sum then divided by the world size), bucket by bucket.

    The MPI library picks its algorithm (MPICH: recursive doubling for short
    buffers, Rabenseifner's for long ones), so the alpha-beta prediction uses
    hpcbench's ``auto`` choice, which follows the same crossover idea. The
    bytes go over the MPI library's own channels: a modelled link
    (``LinkTransport``) does not apply to it.
    """

    name = "mpi"
    cost_model = "auto"
    uses_transport = False

    def start(self, flat, index):
        arr = np.asarray(flat)      # a view: a CPU tensor (real run) or a numpy bucket (emulated run)
        return arr, self.comm.Iallreduce(MPI.IN_PLACE, [arr, MPI.FLOAT], MPI.SUM)

    def test(self, handle):
        return handle[1].Test()

    def wait(self, handle):
        arr, req = handle
        sleep_wait(req, Backoff(spin=16, max_s=5e-4))
        if self.comm.size > 1:
            arr /= self.comm.size


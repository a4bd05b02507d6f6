"""Growing a worker set with new processes: ``MPI_Comm_spawn``, the cost KungFu's 20.39 s grow includes.

KungFu's runner starts a new worker process for a grow (process start,
framework imports, connecting to the peers, receiving the model); its figure
7 example reports 20.39 s for 1 -> 2. The warm pool
(:mod:`hpcbench.runtime.workerset`) leaves those costs out; this module
measures them with MPI's dynamic processes (MPI-2 ``MPI_Comm_spawn``, which
the PyPI ``mpich`` wheel's Hydra process manager supports on one node):

1. *process start*: the active ranks call ``Spawn`` (collective over them;
   rank 0 starts ``n`` Python processes); it returns once
   the children are in ``MPI_Init`` (interpreter start, ``mpi4py`` import,
   the MPI connection to the parents);
2. *imports*: each child imports what a worker needs (``imports``, e.g.
   torch and hpcbench's training runner), timed in the child;
3. *connection*: ``Intercomm.Merge`` (parents first, children after) gives
   one intracommunicator of the grown set, timed in the child;
4. *state*: as the warm pool, rank 0's header by broadcast and each new
   worker's state bytes point to point from old rank ``(r - n0) mod n0``.

Under Slurm, ``MPI_Comm_spawn`` needs a process manager that supports it and
free slots in the allocation: Hydra's ``mpiexec`` inside an allocation of the
largest size (``salloc -n 16`` or ``#SBATCH -n 16``, then ``mpiexec -n 1``)
starts the children through Slurm; a job launched by ``srun`` directly
depends on Slurm's PMI plugin (PMI-2 and PMIx versions differ in spawn
support), so there the warm pool is the portable mode (it uses only the
ranks the launcher started). This was not tried on a Slurm cluster here.
"""

from __future__ import annotations

import sys
import time

import numpy as np
from mpi4py import MPI

from hpcbench.runtime.wait import sleep_bcast, sleep_wait, sleep_waitall
from hpcbench.runtime.workerset import ResizePhases

__all__ = ["spawn_grow", "join_parents", "STATE_TAG"]

#: tag of the state transfer on the merged communicator
STATE_TAG = 29312


def spawn_grow(comm: MPI.Comm, n_new: int, argv, header=None, state: np.ndarray | None = None) -> tuple[MPI.Intercomm, MPI.Intracomm, ResizePhases]:
    """Start ``n_new`` processes of ``python *argv`` and grow ``comm``'s set with them (collective over
    ``comm``; the children call :func:`join_parents`).

    Parameters
    ----------
    comm : mpi4py.MPI.Intracomm
        The active workers (ranks ``0 .. n0-1`` of the grown set).
    n_new : int
        Processes to start, >= 1.
    argv : sequence of str
        The children's Python arguments (``["-m", "module", ...]`` or a script and its arguments); the
        child must call :func:`join_parents`.
    header : object, optional
        Rank 0's picklable context for the children.
    state : ndarray of uint8, optional
        This rank's state bytes (every old rank the same length).

    Returns
    -------
    intercomm : mpi4py.MPI.Intercomm
        Parents to children (``Disconnect`` it when the children leave).
    merged : mpi4py.MPI.Intracomm
        The grown set, parents first.
    phases : ResizePhases
        ``process_start_s`` (``Spawn``), ``communicator_s`` (``Merge`` as the parents wait for it, which
        includes the children's imports), ``state_s``; the children's own imports and connection times come
        back in ``extra`` (``imports_s``, ``connection_s``: the slowest child's).
    """
    n0 = comm.size
    state = np.zeros(0, dtype=np.uint8) if state is None else np.ascontiguousarray(state).view(np.uint8)
    t0 = time.perf_counter()
    inter = comm.Spawn(sys.executable, args=list(argv), maxprocs=n_new, root=0)
    t1 = time.perf_counter()
    merged = inter.Merge(high=False)
    t2 = time.perf_counter()
    sleep_bcast(merged, (header, state.nbytes, n0) if merged.rank == 0 else None)
    targets = list(range(n0 + merged.rank, n0 + n_new, n0)) if state.nbytes else []
    sleep_waitall([merged.Isend([state, MPI.BYTE], dest=r, tag=STATE_TAG) for r in targets])
    t3 = time.perf_counter()
    child = np.zeros(2)
    sleep_wait(merged.Iallreduce(MPI.IN_PLACE, child, op=MPI.MAX))     # the children's imports, connection
    phases = ResizePhases("grow", n0, n0 + n_new, process_start_s=t1 - t0, communicator_s=t2 - t1,
                          state_s=t3 - t2, bytes_moved=len(targets) * state.nbytes)
    phases.extra.update(imports_s=float(child[0]), connection_s=float(child[1]))
    return inter, merged, phases


def join_parents(imports=None):
    """In a spawned child: import what a worker needs, join the parents' set and receive the state.

    Parameters
    ----------
    imports : callable, optional
        Called first and timed (the worker's imports).

    Returns
    -------
    parent : mpi4py.MPI.Intercomm
    merged : mpi4py.MPI.Intracomm
        The grown set (this child's rank is ``n0`` or more).
    header : object
    state : ndarray of uint8

    Raises
    ------
    RuntimeError
        Not started by ``MPI_Comm_spawn``.
    """
    parent = MPI.Comm.Get_parent()
    if parent == MPI.COMM_NULL:
        raise RuntimeError("not a spawned process (no parent communicator)")
    t0 = time.perf_counter()
    if imports is not None:
        imports()
    t1 = time.perf_counter()
    merged = parent.Merge(high=True)
    t2 = time.perf_counter()
    header, nbytes, n0 = sleep_bcast(merged, None)
    state = np.empty(nbytes, dtype=np.uint8)
    if nbytes:
        sleep_wait(merged.Irecv([state, MPI.BYTE], source=(merged.rank - n0) % n0, tag=STATE_TAG))
    sleep_wait(merged.Iallreduce(MPI.IN_PLACE, np.array([t1 - t0, t2 - t1]), op=MPI.MAX))
    return parent, merged, header, state

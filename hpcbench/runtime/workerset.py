"""An elastic set of active workers over the ranks ``mpirun`` started: a warm pool that sleeps until needed.

KungFu (Mai et al., OSDI'20) resizes a training job while it trains: its
peers agree on the new cluster (``srcs/go/kungfu/peer/peer.go``:
``ResizeClusterFromURL`` checks the proposal with ``BytesConsensus``,
``propose`` notifies the runners, which start or stop worker processes, and
the peers rebuild their session over the new peer list; a peer left out is
``detached`` and exits), and the new workers receive the model by a
broadcast from the old ones. Its figure 7 reports the time of a resize:
20.39 s for a grow 1 -> 2 (a new process: start, imports, connection) and
40.12 ms for a shrink 2 -> 1.

hpcbench keeps the set of active workers as a prefix ``0 .. n-1`` of the
ranks ``mpirun`` started (the *warm pool*): ranks ``n ..`` wait, sleeping
(:func:`hpcbench.runtime.wait.sleep_wait` on a nonblocking broadcast, never
a spin), until a grow activates them. Differences from KungFu, and why:

- no new process is started for a grow: the pool's ranks are already
  running and connected, so a resize measures the membership change and
  the state transfer alone (a spawn path is separate:
  :mod:`hpcbench.runtime.spawnpool`);
- rank 0 is never removed (KungFu warns that a new root loses the state);
  active ranks are always the prefix, so every active rank keeps its rank;
- the new workers receive the state point to point, each from a distinct
  old worker (new rank ``r`` from old rank ``(r - n0) mod n0``), so a grow
  ``n0 -> 2 n0`` moves every byte once, in parallel, instead of a tree
  broadcast to every rank (the old ranks already hold the state).

Protocol (every call below is collective where it says so):

- grow ``n0 -> n1``: the active ranks post the pool's *control* broadcast
  (``[n1, n0]``, from rank 0, over a duplicate of the world communicator) that
  every waiting rank is sleeping in; then every rank of the world splits the
  world (ranks ``< n1``: the new active communicator); then rank 0 sends a
  header to the new communicator (pickled object: the caller's context) and
  each new rank receives the state bytes from its old peer;
- shrink ``n0 -> n1``: only the active ranks split their communicator;
  ranks ``>= n1`` return to the pool (they call :meth:`WorkerSet.wait`
  next). The pool is not woken;
- close: the active ranks post the control broadcast ``[0, n0]``; every waiting
  rank returns None from :meth:`WorkerSet.wait`.

Every rank of the world calls the control broadcast once per grow and once
at close, in the same order (the active ones in :meth:`WorkerSet.resize` or
:meth:`WorkerSet.close`, the waiting ones in :meth:`WorkerSet.wait`), so
the broadcasts always match.
"""

from __future__ import annotations

import pickle
import time
from dataclasses import dataclass, field

import numpy as np
from mpi4py import MPI

from hpcbench.runtime.wait import Backoff, sleep_bcast, sleep_wait, sleep_waitall

__all__ = ["WorkerSet", "Activation", "ResizePhases", "POOL_SLEEP_S"]

#: longest sleep between polls of a waiting rank (s): 16 waiting ranks cost 16 x 100 polls/s at most
POOL_SLEEP_S = 0.01
#: tag of the state transfer on the new communicator
_STATE_TAG = 29311


@dataclass
class ResizePhases:
    """One resize's phases on this rank, in seconds (0 where a phase did not happen), and its bytes.

    Attributes
    ----------
    kind : {"grow", "shrink"}
    old, new : int
        Active workers before and after.
    notify_s : float
        The control broadcast that wakes the pool (grow only).
    process_start_s : float
        New processes started (the spawn path; 0 in the warm pool).
    communicator_s : float
        Splitting the new communicator (with the notification: the membership change).
    state_s : float
        Header and state transfer to the new workers (grow only).
    bytes_moved : int
        State and header bytes received by new workers (all of them together; counted on the senders).
    """

    kind: str
    old: int
    new: int
    notify_s: float = 0.0
    process_start_s: float = 0.0
    communicator_s: float = 0.0
    state_s: float = 0.0
    bytes_moved: int = 0
    extra: dict = field(default_factory=dict)


@dataclass
class Activation:
    """What a waiting rank gets when a grow activates it.

    Attributes
    ----------
    comm : mpi4py.MPI.Comm
        The new active communicator.
    header : object
        The object rank 0 passed to :meth:`WorkerSet.resize`.
    state : ndarray of uint8
        The state bytes received from its old peer.
    phases : ResizePhases
        This rank's phases of the resize.
    """

    comm: MPI.Comm
    header: object
    state: np.ndarray
    phases: ResizePhases


class WorkerSet:
    """The active prefix of the world's ranks and its warm pool (see the module docstring).

    Construction is collective over ``world``.

    Parameters
    ----------
    world : mpi4py.MPI.Comm
        Every rank ``mpirun`` started (the pool's bound: at most ``world.size`` active workers).
    active : int
        Active workers at the start (``1 .. world.size``).

    Attributes
    ----------
    comm : mpi4py.MPI.Comm
        The active communicator (``MPI.COMM_NULL`` on a waiting rank).
    workers : int
        Active workers (the size of :attr:`comm` on an active rank; the
        world's ranks beyond them wait in the pool).

    Raises
    ------
    ValueError
        ``active`` out of ``1 .. world.size``.
    """

    def __init__(self, world: MPI.Comm, active: int) -> None:
        if not 1 <= active <= world.size:
            raise ValueError(f"active workers must be in 1..{world.size}, got {active!r}")
        self.world = world
        self.control = world.Dup()
        self.workers = int(active)
        self.comm = world.Split(0 if world.rank < active else MPI.UNDEFINED, world.rank)
        self._closed = False

    @property
    def active(self) -> bool:
        """Whether this rank is an active worker."""
        return self.world.rank < self.workers

    # -- waiting ranks --------------------------------------------------------------------------------
    def wait(self) -> Activation | None:
        """Sleep in the pool until a grow activates this rank (its :class:`Activation`) or the set closes (None).

        Collective with the active ranks' :meth:`resize` (grows) and :meth:`close`.
        """
        while True:
            msg = np.zeros(2, dtype=np.int64)
            sleep_wait(self.control.Ibcast(msg, root=0), Backoff(first_s=1e-4, max_s=POOL_SLEEP_S))
            n1, old = int(msg[0]), int(msg[1])
            if n1 == 0:
                self._closed = True
                return None
            t0 = time.perf_counter()
            comm = self.world.Split(0 if self.world.rank < n1 else MPI.UNDEFINED, self.world.rank)
            self.workers = n1
            if comm == MPI.COMM_NULL:
                continue        # not this grow
            phases = ResizePhases("grow", old, n1, communicator_s=time.perf_counter() - t0)
            self.comm = comm
            t1 = time.perf_counter()
            header, state = self._receive(old)
            phases.state_s = time.perf_counter() - t1
            return Activation(comm, header, state, phases)

    def _receive(self, old: int):
        header, nbytes = sleep_bcast(self.comm, None)
        state = np.empty(nbytes, dtype=np.uint8)
        if nbytes:
            src = (self.comm.rank - old) % old
            sleep_wait(self.comm.Irecv([state, MPI.BYTE], source=src, tag=_STATE_TAG))
        return header, state

    # -- active ranks ---------------------------------------------------------------------------------
    def resize(self, n1: int, header=None, state: np.ndarray | None = None) -> ResizePhases:
        """Grow or shrink the active set to ``n1`` workers (collective over the active ranks; a grow also over
        the waiting ranks, which are in :meth:`wait`).

        Parameters
        ----------
        n1 : int
            New number of active workers, ``1 .. world.size``.
        header : object, optional
            Picklable; rank 0's is given to every new worker (grow).
        state : ndarray of uint8, optional
            This rank's state bytes; every old rank passes its own (same length), each new worker receives one
            old rank's (grow).

        Returns
        -------
        ResizePhases
            This rank's phases. After a shrink, a rank ``>= n1`` is no longer active (:attr:`active` False):
            it calls :meth:`wait` next.

        Raises
        ------
        ValueError
            ``n1`` out of range, or equal to the current size.
        """
        n0 = self.workers
        if not 1 <= n1 <= self.world.size or n1 == n0:
            raise ValueError(f"resize to {n1!r} workers: need 1..{self.world.size} and a change from {n0}")
        if n1 < n0:
            t0 = time.perf_counter()
            comm = self.comm.Split(0 if self.comm.rank < n1 else MPI.UNDEFINED, self.comm.rank)
            self.comm.Free()
            self.comm, self.workers = comm, n1
            return ResizePhases("shrink", n0, n1, communicator_s=time.perf_counter() - t0)
        state = np.zeros(0, dtype=np.uint8) if state is None else np.ascontiguousarray(state).view(np.uint8)
        t0 = time.perf_counter()
        sleep_wait(self.control.Ibcast(np.array([n1, n0], dtype=np.int64), root=0))
        t1 = time.perf_counter()
        comm = self.world.Split(0, self.world.rank)
        t2 = time.perf_counter()
        self.comm.Free()
        self.comm, self.workers = comm, n1
        head = pickle.dumps(header, protocol=pickle.HIGHEST_PROTOCOL) if comm.rank == 0 else b""
        sleep_bcast(comm, (header, state.nbytes) if comm.rank == 0 else None)
        targets = list(range(n0 + comm.rank, n1, n0)) if state.nbytes else []
        sleep_waitall([comm.Isend([state, MPI.BYTE], dest=r, tag=_STATE_TAG) for r in targets])
        t3 = time.perf_counter()
        moved = len(targets) * state.nbytes + (len(head) * (n1 - n0) if comm.rank == 0 else 0)
        return ResizePhases("grow", n0, n1, notify_s=t1 - t0, communicator_s=t2 - t1, state_s=t3 - t2,
                            bytes_moved=moved)

    def close(self) -> None:
        """End the set: the waiting ranks return None from :meth:`wait` (collective over the active ranks and
        the waiting ones); frees the communicators."""
        if not self._closed and self.active:
            sleep_wait(self.control.Ibcast(np.array([0, self.workers], dtype=np.int64), root=0))
        self._closed = True
        if self.comm != MPI.COMM_NULL:
            self.comm.Free()
            self.comm = MPI.COMM_NULL
        if self.control != MPI.COMM_NULL:
            self.control.Free()

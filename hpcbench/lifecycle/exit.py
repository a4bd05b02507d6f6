"""How a job's process ends: with its exit status intact under ``mpiexec``, ``srun`` and ``python -m mpi4py``.

See the exit statuses in :mod:`hpcbench.lifecycle.driver`.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import time

__all__ = ["exit_process", "abort_quietly", "under_slurm_step", "is_main_thread", "STDIO_DRAIN_S"]

#: Pause before MPI_Abort so that the launcher forwards what this rank just
#: wrote to stderr (mpiexec drops output still in the pipe once it kills the job).
STDIO_DRAIN_S = 0.3


def is_main_thread() -> bool:
    """Whether this is the main thread (the only one that may install signal handlers)."""
    return threading.current_thread() is threading.main_thread()


def under_slurm_step() -> bool:
    """Whether this process is a task of a Slurm step (``srun``)."""
    return "SLURM_STEP_ID" in os.environ and "SLURM_PROCID" in os.environ


def abort_quietly(comm, status: int) -> None:
    """``MPI_Abort(status)`` with MPICH's own one-line abort notice kept off stderr."""
    time.sleep(STDIO_DRAIN_S)
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, 2)
    except OSError:
        pass
    comm.Abort(status)


def exit_process(status: int) -> None:
    """Flush, finalize MPI and leave with ``status`` (never returns).

    ``sys.exit`` would let ``python -m mpi4py`` turn a non-zero status into
    ``MPI_Abort`` (killing the job with 137 under Slurm); leaving through the
    C library's ``exit`` (:func:`_c_exit`) keeps 2 as 2 under every launcher:

    - under ``srun`` (and at world size 1) every rank finalizes and exits
      with ``status``; ``srun`` reports the largest status of its tasks;
    - under MPICH's ``mpiexec`` a non-zero status ends the job through
      ``MPI_Abort(status)`` from rank 0, whose status ``mpiexec`` returns
      exactly: ``mpiexec`` kills the other processes as soon as one exits
      non-zero, so ranks exiting with 2 together would race and the job
      would end with 9 (SIGKILL) as often as not.
    """
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:  # noqa: BLE001
            pass
    if status and under_slurm_step() and is_main_thread():
        # srun --kill-on-bad-exit sends SIGTERM to the tasks still finalizing once the first leaves with 2:
        # each leaves with its own status instead of dying by the signal (143)
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    mpi = sys.modules.get("mpi4py.MPI")
    if mpi is not None and mpi.Is_initialized() and not mpi.Is_finalized():
        world = mpi.COMM_WORLD
        if status and world.size > 1 and not under_slurm_step():
            if world.rank == 0:
                abort_quietly(world, status)
            time.sleep(30.0)  # rank 0's abort ends this process; leave anyway if it does not
            os._exit(status)
        from hpcbench.runtime.finalize import run_before_finalize

        run_before_finalize()
        mpi.Finalize()
    _c_exit(status)


def _c_exit(status: int) -> None:
    """Leave through the C library's ``exit``: its ``atexit`` handlers run, Python's do not.

    MPICH says goodbye to its process manager in a C ``atexit`` handler;
    ``os._exit`` skips it, and MPICH's ``mpiexec`` then takes a rank that
    finalized and left with 0 for a crashed one and kills the others
    (``Killed (signal 9)``, exit status 9: in about half of 4-rank runs of a
    program that only gathers, finalizes and calls ``os._exit(0)``; never
    with ``exit``). Python's own shutdown is skipped as before, so
    ``python -m mpi4py`` cannot turn the status into an abort.
    """
    try:
        import ctypes

        libc_exit = ctypes.CDLL(None).exit
    except (OSError, AttributeError):  # no C library to call: leave as before
        os._exit(status)
    libc_exit(int(status))
    os._exit(status)  # pragma: no cover - exit() does not return

"""One job lifecycle for every hpcbench runner: parse, agree, open, run, end.

Every program a user launches (``python -m hpcbench.fl``, the micro-benchmarks,
``hpcbench.train``, ``hpcbench.pipeline``) is a :class:`Job` subclass run by
:func:`main`. The lifecycle is the same for all of them:

1. **parse** the command line on every rank (argparse; only rank 0 prints
   usage, help and errors);
2. **configure** (build the typed config) and **prepare** (load data,
   traces, models; collective) on every rank, then **agree**: the first
   input error seen by any rank ends every rank with exit status 2 and one
   message from rank 0, before any output exists;
   Between the two, the ranks of each node check that their estimated
   memory (:meth:`Job.memory_need`) fits what the node has available;
3. **open the output** on rank 0: every file the run will write is declared
   (the results file, :meth:`Job.outputs` such as a checkpoint or a Chrome
   trace, ``--tensorboard``'s run folder), checked together against each
   other and the run's inputs (:func:`hpcbench.runtime.outputs.check_outputs`:
   an existing file is refused unless ``--overwrite``, or reopened for
   appending when :meth:`Job.append_output` names it: a resumed run), then
   locked for the run (a file another live run holds is refused, exit 2,
   before anything is truncated); a bad file-name template is an input
   error naming the key. The new file gets a ``run_id``; the results file
   is flushed after every append and its
   ``heartbeat`` refreshed every few seconds, so a SIGKILLed run leaves a
   readable file marked ``status = "running"`` whose stale heartbeat tells
   it was interrupted (:mod:`hpcbench.results.status`);
4. **run**; on any exception on any rank, that rank prints one message
   (with the traceback for errors that are not input errors); a rank other
   than 0 first tells rank 0 (:class:`~hpcbench.runtime.failure.FailureChannel`),
   which marks the results file ``failed``; then the rank aborts the whole
   job (``MPI_Abort``), so every rank ends within seconds with a non-zero
   status: 2 for an :class:`~hpcbench.runtime.errors.InputError`, 1
   otherwise. A job that hangs is worse than one that crashes.
5. **end**: the process leaves through :func:`~hpcbench.lifecycle.exit.exit_process`, which finalizes
   MPI and exits with the status itself, so that the status survives
   ``python -m mpi4py`` (which would turn ``sys.exit(2)`` into an abort) and
   ``srun`` alike.

Fault injection (tests only): the hidden flag ``--fault-inject RANK:STEP:MODE``
makes rank RANK raise ``RuntimeError`` (MODE ``raise``) or an
``InputError`` (MODE ``input``), or vanish at once with ``os._exit(1)``
(MODE ``exit``: no handler runs, as after a native crash) when the runner reaches
:func:`hpcbench.runtime.faults.fault_point` with that step. RANK must be a rank of the job and STEP
at least 1 (and at most :meth:`Job.fault_steps` where the runner knows its
steps), else the flag is an input error. It is recorded in the provenance
(``fault_injection``).

Exit statuses. A failure the lifecycle sees (any exception, SIGTERM,
Ctrl-C) ends the job with exactly 1 (2 for bad input) under MPICH's
``mpiexec``, ``srun`` and ``python -m mpi4py``. Under ``mpiexec`` the
failing rank calls ``MPI_Abort(status)``, whose status ``mpiexec`` returns.
Under ``srun`` it does not (Slurm kills every task of an aborted step with
SIGKILL: 137): it sends every rank a stop notice and leaves with its own
status, the others leave with 1, and ``srun`` reports the largest
(:mod:`hpcbench.runtime.failure`). A rank that *vanishes* (SIGKILL, the
out-of-memory killer, a segmentation fault, MODE ``exit``) runs no handler,
and the status is the launcher's:

- MPICH ``mpiexec`` (hydra) on one host kills the other ranks (SIGTERM then
  SIGKILL at once) and returns the bitwise OR of all the processes' wait
  statuses (``mpiexec.c``): the vanished rank's own exit status when no
  killed rank's status was collected, else that of the signal (9, SIGKILL);
  which of the two depends on timing (both were seen at ``-n 2`` to ``-n 4``);
- on several hosts, where MPICH 5.0.2's ``mpiexec`` cannot signal the other
  hosts' proxies, the watch of :mod:`hpcbench.runtime.peerwatch` (started for
  every job whose ranks span more than one host name) ends them: rank 0 marks
  the file ``failed`` and every rank leaves with status 1;
- ``python -m mpi4py`` under ``mpiexec``: the same (nothing of Python runs);
- ``srun`` with ``--kill-on-bad-exit=1`` (the ``jobs/*.sbatch`` templates):
  the other tasks get SIGTERM, which the lifecycle handles as a failure
  (status 1, the file marked ``failed``), so ``srun`` reports the vanished
  rank's own status (1 for MODE ``exit``), or 128 + the signal that killed
  it; without it the other tasks run on until they wait on the lost rank.
"""

from __future__ import annotations

import argparse
import errno
import signal
import sys
import threading
import time
import traceback

from hpcbench.lifecycle.exit import STDIO_DRAIN_S, exit_process, is_main_thread, under_slurm_step
from hpcbench.lifecycle.job import Job
from hpcbench.lifecycle.outputs import check_outputs_early, check_tensorboard, open_results, release_outputs
from hpcbench.lifecycle.parser import HelpShown, RankParser
from hpcbench.runtime import faults
from hpcbench.runtime.agreement import agree
from hpcbench.runtime.errors import EXIT_FAILURE, EXIT_INPUT, EXIT_OK, InputError

__all__ = ["Terminated", "main", "run", "entry"]


class Terminated(BaseException):
    """SIGTERM (Slurm time limit, ``scancel``) reached the process."""


def _oversubscribed(job: Job, machines: list[str], cores: list[int], compute_mode) -> str:
    """Machines with more ranks than cores (provenance ``oversubscribed``); warns once for ``compute: real``.

    Real compute of more ranks than cores measures the operating system's
    time-slicing, not the model; emulated compute sleeps and is unaffected.
    """
    from hpcbench.runtime.hosts import oversubscription

    text = oversubscription(machines, cores)
    if text and compute_mode == "real":
        sys.stderr.write(f"{job.prog}: warning: {text} with compute: real: the timings measure time-slicing "
                         f"of the cores; use compute: emulated (and time_dilation) for more ranks than cores\n")
    return text


def _on_sigterm(signum, frame):
    raise Terminated(f"signal {signum} (SIGTERM)")


#: errors of the storage a run writes to (a full disk or quota, a failing device, a read-only remount): one line
_STORAGE_ERRORS = (errno.ENOSPC, errno.EDQUOT, errno.EIO, errno.EROFS)

#: the failure channel of the running job (set once the results file is open; see :func:`run`)
_CHANNEL = None
#: the watch for ranks that vanish, on a job over several hosts (:mod:`hpcbench.runtime.peerwatch`)
_WATCH = None


def _fail(job: Job, exc: BaseException, results) -> int:
    """Report an exception on this rank and end the job; returns the status at size 1.

    A rank other than 0 tells rank 0 first (which marks the results file
    ``failed``), then ends the job: ``MPI_Abort``, or under ``srun`` stop
    notices to every rank and its own exit.
    """
    code = EXIT_INPUT if isinstance(exc, InputError) else EXIT_FAILURE
    rank = job.comm.rank
    where = f"rank {rank}: " if job.comm.size > 1 else ""
    if isinstance(exc, InputError):
        text = f"{job.prog}: {where}error: {exc}\n"
    elif isinstance(exc, OSError) and exc.errno in _STORAGE_ERRORS:  # the disk, not the code: no traceback
        text = f"{job.prog}: {where}error: {exc}\n"
    elif isinstance(exc, (Terminated, KeyboardInterrupt)):
        text = f"{job.prog}: {where}stopped: {type(exc).__name__} {exc}\n"
    else:
        text = (f"{job.prog}: {where}error: {type(exc).__name__}: {exc}\n"
                + "".join(traceback.format_exception(exc)))
    try:
        sys.stderr.write(text)
        sys.stderr.flush()
    except Exception:  # noqa: BLE001
        pass
    error = f"{type(exc).__name__}: {exc}"[:2000]
    if results is not None:
        try:
            results.close("failed", error=error)
        except Exception:  # noqa: BLE001 - the abort matters more than the status attribute
            pass
    try:
        from hpcbench.runtime.outputs import discard_pending

        discard_pending()
        release_outputs(job)
    except Exception:  # noqa: BLE001
        pass
    if _WATCH is not None:
        _WATCH.farewell()  # this rank's end is a handled failure, not a vanished rank
    notified = False
    if _CHANNEL is not None and rank != 0:
        try:
            notified = _CHANNEL.notify(code, error)
        except Exception:  # noqa: BLE001 - never let the notice stop the abort
            pass
    if job.comm.size > 1:
        if not notified:
            time.sleep(STDIO_DRAIN_S)  # the acknowledgement took at least as long
        if under_slurm_step() and _CHANNEL is not None:
            # srun has MPI_Abort's tasks killed (status 137 whatever the failure): stop the others instead
            # (each leaves with 1) and leave with this rank's own status, which srun then reports
            try:
                _CHANNEL.stop_others(code, error)
            finally:
                from hpcbench.runtime.failure import _leave

                _leave(code)
        job.comm.Abort(code)  # MPICH adds one line naming the rank; kept, since the job did not agree to stop
    return code


def run(job_cls: type[Job], argv: list[str] | None = None, comm=None) -> int:
    """Run one job through the whole lifecycle; returns the exit status.

    Collective over ``comm`` (default ``MPI.COMM_WORLD``). On an exception
    after the agreement points at world size > 1, the job is ended from
    inside with status 1, or 2 for an input error (``MPI_Abort``; under
    ``srun`` stop notices to every rank, see the module docstring).
    """
    global _CHANNEL
    from mpi4py import MPI

    comm = MPI.COMM_WORLD if comm is None else comm
    argv = list(sys.argv[1:] if argv is None else argv)
    job = job_cls(comm)
    faults.arm(None, comm.rank)
    RankParser.rank = comm.rank
    parser = RankParser(prog=job.prog, description=job.description, epilog=job.epilog,
                        formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--overwrite", action="store_true",
                        help="replace an existing output file (refused otherwise)")
    parser.add_argument("--fault-inject", metavar="RANK:STEP:MODE", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--tensorboard", metavar="DIR", default=None,
                        help="rank 0 writes live TensorBoard scalars (and the config as text) to DIR/<run>/ "
                             "as rows are written; needs pip install -e '.[tensorboard]'")
    job.add_arguments(parser)
    from hpcbench.runtime import settings

    settings.add_arguments(parser)
    error = None
    args = None
    try:
        if job.passthrough:
            args, args.passthrough = parser.parse_known_args(argv)
        else:
            args = parser.parse_args(argv)
        fault = faults.FaultSpec(args.fault_inject, comm.size) if args.fault_inject else None
        faults.arm(fault, comm.rank)
        if args.tensorboard:
            check_tensorboard()
        settings.apply(args)
        job.configure(args)
        if fault is not None:
            fault.check_steps(job.fault_steps())
    except HelpShown as shown:
        return int(shown.args[0] or 0)
    except InputError as exc:
        error = str(exc)
    except Exception as exc:  # noqa: BLE001 - a bug in configure: end every rank, never hang
        return _fail(job, exc, None)
    error = agree(comm, error)
    if error is None:
        from hpcbench.runtime.memory import node_memory_error

        try:
            need = job.memory_need()  # from the config: the same kind of answer on every rank
            early = check_outputs_early(job, args) if comm.rank == 0 else None
        except Exception as exc:  # noqa: BLE001 - a bug in the estimate: end every rank, never hang
            return _fail(job, exc, None)
        error = agree(comm, node_memory_error(comm, need) or early)
    if error is None:
        try:
            job.prepare()
        except InputError as exc:
            error = str(exc)
        except Exception as exc:  # noqa: BLE001 - prepare is collective: the others would wait in agree
            return _fail(job, exc, None)
        error = agree(comm, error)
    if error:
        if comm.rank == 0:
            sys.stderr.write(f"{error}\n" if error.startswith(job.prog) or "usage:" in error
                             else f"{job.prog}: error: {error}\n")
        return EXIT_INPUT
    from hpcbench.runtime import provenance
    from hpcbench.runtime.hosts import gather_cores, gather_hostnames, gather_machines

    start = provenance.utc_now()
    hostnames = gather_hostnames(comm)
    machines = gather_machines(comm)      # emulated hosts of one machine share its cores
    cores = gather_cores(comm)
    results = None
    if comm.rank == 0:
        try:
            attrs = provenance.collect(comm, hostnames, getattr(getattr(job, "cfg", None), "seed", None),
                                       start)
            attrs["fault_injection"] = args.fault_inject or ""
            attrs.update(job.provenance())
            attrs["oversubscribed"] = _oversubscribed(job, machines, cores, attrs.get("compute_mode"))
            results = open_results(job, args.overwrite, start, attrs, args, args.tensorboard)
            if results is not None and args.tensorboard:
                from hpcbench.results.tensorboard import attach

                attach(results, job.output_path("--tensorboard"), job.kind, results.get_attr("config_yaml", ""))
        except InputError as exc:
            error = str(exc)
        except Exception as exc:  # noqa: BLE001 - the other ranks wait in agree: abort them
            return _fail(job, exc, results)
        if error is not None and results is not None:  # refused after opening
            try:
                results.close("failed", error=error)
            except Exception:  # noqa: BLE001
                pass
            release_outputs(job)
    error = agree(comm, error)
    if error:
        if comm.rank == 0:
            sys.stderr.write(f"{job.prog}: error: {error}\n")
        try:
            job.release()
        except Exception as exc:  # noqa: BLE001 - a bug in release: end every rank, never hang
            return _fail(job, exc, None)
        return EXIT_INPUT
    _CHANNEL = _listen_for_failures(comm, results, job.prog)
    previous = signal.signal(signal.SIGTERM, _on_sigterm) if is_main_thread() else None
    try:
        status = job.run(results)
        if results is not None:
            results.close("completed")  # raises when a full disk kept the file from completing
    except BaseException as exc:  # noqa: BLE001 - every failure ends every rank
        return _fail(job, exc, results)
    finally:
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)
    release_outputs(job)
    _stop_listening()
    return EXIT_OK if status is None else int(status)


def _listen_for_failures(comm, results, prog: str = "hpcbench"):
    """Start the failure channel (collective), on several hosts the watch for vanished ranks (collective), and the
    results file's heartbeat; rank 0 marks the file on a notice or a vanished rank."""
    global _WATCH
    from hpcbench.runtime.failure import FailureChannel
    from hpcbench.runtime.finalize import before_finalize
    from hpcbench.runtime.hosts import gather_hostnames
    from hpcbench.runtime.peerwatch import PeerWatch

    if results is not None:
        results.start_heartbeat()
    if comm.size == 1:
        return None

    # the first failure rank 0 hears of names the cause; what follows it (ranks killed by the abort, stopped by
    # the watch or by srun) are its consequences and do not replace it
    first = threading.Lock()

    def mark(rank: int, status: int, message: str) -> None:
        from hpcbench.runtime.outputs import discard_pending

        if results is not None and first.acquire(blocking=False):
            results.mark_failed(f"rank {rank}: {message}")
        discard_pending()  # the abort that follows would leave a half-written checkpoint's temporary file

    channel = FailureChannel(comm, mark, stop_all=under_slurm_step())
    if len(set(gather_hostnames(comm))) > 1:   # one host: mpiexec itself ends the others when a rank vanishes
        _WATCH = PeerWatch(comm, lambda rank, message: mark(rank, 1, message), prog=prog)
    before_finalize(_stop_listening)
    return channel


def _stop_listening() -> None:
    global _CHANNEL, _WATCH
    if _WATCH is not None:
        _WATCH.close()
        _WATCH = None
    if _CHANNEL is not None:
        _CHANNEL.close()
        _CHANNEL = None


def main(job: str | type[Job], argv: list[str] | None = None) -> int:
    """Entry point of a runner's ``__main__``: run the lifecycle, then end the process.

    ``job`` is the Job class or its ``"module:Class"`` path; given as a path,
    it is imported only after the wake-up signal is blocked (before mpi4py
    and torch start threads; see :mod:`hpcbench.runtime.wakeup`).

    Never returns (see :func:`~hpcbench.lifecycle.exit.exit_process`); call :func:`run` to stay in-process.
    """
    from hpcbench.runtime.wakeup import block_wake_signal

    block_wake_signal()  # before mpi4py and torch start threads (see hpcbench.runtime.wakeup)
    if isinstance(job, str):
        import importlib

        module, _, name = job.partition(":")
        job = getattr(importlib.import_module(module), name)
    status = run(job, argv)
    exit_process(status)
    return status  # pragma: no cover


def entry(job: str):
    """``main(argv=None)`` for a runner's ``__main__`` or a forwarding module.

    ``job`` is the ``"module:Class"`` path of the Job; nothing of it is
    imported until ``main`` runs (see :func:`main`).
    """
    def entry_main(argv: list[str] | None = None) -> int:
        return main(job, argv)

    entry_main.__doc__ = f"Run ``{job}`` through the shared job lifecycle; never returns."
    return entry_main

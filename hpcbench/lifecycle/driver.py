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
5. **end**: the process leaves through :func:`exit_process`, which finalizes
   MPI and exits with the status itself, so that the status survives
   ``python -m mpi4py`` (which would turn ``sys.exit(2)`` into an abort) and
   ``srun`` alike.

Fault injection (tests only): the hidden flag ``--fault-inject RANK:STEP:MODE``
makes rank RANK raise ``RuntimeError`` (MODE ``raise``) or an
``InputError`` (MODE ``input``), or vanish at once with ``os._exit(1)``
(MODE ``exit``: no handler runs, as after a native crash) when the runner reaches
:func:`fault_point` with that step. RANK must be a rank of the job and STEP
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

- MPICH ``mpiexec`` (hydra) kills the other ranks (SIGTERM then SIGKILL at
  once) and returns the bitwise OR of all the processes' wait statuses
  (``mpiexec.c``): the vanished rank's own exit status when no killed rank's
  status was collected, else that of the signal (9, SIGKILL); which of the
  two depends on timing (both were seen at ``-n 2`` to ``-n 4``);
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
import os
import signal
import string
import sys
import time
import traceback
import uuid
from abc import ABC, abstractmethod
from pathlib import Path
from typing import Any, ClassVar, Mapping, Sequence

from hpcbench.runtime.errors import EXIT_FAILURE, EXIT_INPUT, EXIT_OK, InputError
from hpcbench.runtime.outputs import Output

__all__ = ["Job", "RankParser", "UsageError", "Terminated", "main", "run", "exit_process",
           "fault_point", "agree", "format_output_path", "job_arguments", "entry"]


class UsageError(InputError):
    """A command-line usage error (argparse's), printed with the usage line by rank 0."""


class Terminated(BaseException):
    """SIGTERM (Slurm time limit, ``scancel``) reached the process."""


class _HelpShown(Exception):
    pass


class RankParser(argparse.ArgumentParser):
    """``argparse.ArgumentParser`` that prints only on rank 0 and never exits.

    Usage errors raise :class:`UsageError` (the lifecycle agrees on them and
    exits 2 on every rank); ``--help`` prints on rank 0 and ends every rank
    with status 0.
    """

    rank: int = 0

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        from hpcbench.runtime.config import finite_float

        self.register("type", float, finite_float)  # every type=float flag refuses inf and nan

    def error(self, message: str):  # noqa: D102 - argparse API
        raise UsageError(f"{self.format_usage().rstrip()}\n{self.prog}: error: {message}")

    def exit(self, status: int = 0, message: str | None = None):  # noqa: D102
        if message and self.rank == 0:
            sys.stderr.write(message)
        raise _HelpShown(status)

    def _print_message(self, message, file=None):  # noqa: D102
        if self.rank == 0:
            super()._print_message(message, file)


class _Fault:
    def __init__(self, spec: str, size: int):
        try:
            rank, step, mode = spec.split(":")
            self.rank, self.step, self.mode = int(rank), int(step), mode
        except ValueError:
            raise UsageError(f"--fault-inject: expected RANK:STEP:MODE, got {spec!r}") from None
        if self.mode not in ("raise", "input", "exit"):
            raise UsageError(f"--fault-inject: MODE must be 'raise', 'input' or 'exit', got {self.mode!r}")
        if not 0 <= self.rank < size:
            raise UsageError(f"--fault-inject: RANK {self.rank} is not a rank of this job (0..{size - 1})")
        if self.step < 1:
            raise UsageError(f"--fault-inject: STEP {self.step} must be >= 1 (steps count from 1)")

    def check_steps(self, steps: int | None) -> None:
        if steps is not None and self.step > steps:
            raise InputError(f"--fault-inject: STEP {self.step} is beyond the {steps} steps of this job")


#: Pause before MPI_Abort so that the launcher forwards what this rank just
#: wrote to stderr (mpiexec drops output still in the pipe once it kills the job).
_STDIO_DRAIN_S = 0.3

_FAULT: _Fault | None = None
_RANK = 0


def fault_point(step: int) -> None:
    """Where a runner may fail on purpose (``--fault-inject``; tests only).

    Call it once per unit of work (round, iteration, size) with a step
    number that counts from 1. It does nothing unless this rank and step
    match the fault spec.

    Raises
    ------
    RuntimeError
        When the fault's mode is ``raise``.
    InputError
        When the fault's mode is ``input``.
    """
    if _FAULT is None or _FAULT.rank != _RANK or _FAULT.step != step:
        return
    if _FAULT.mode == "exit":
        sys.stderr.write(f"fault injected on rank {_RANK} at step {step}: os._exit({EXIT_FAILURE})\n")
        sys.stderr.flush()
        os._exit(EXIT_FAILURE)
    if _FAULT.mode == "input":
        raise InputError(f"fault injected on rank {_RANK} at step {step} (as an input error)")
    raise RuntimeError(f"fault injected on rank {_RANK} at step {step}")


class Job(ABC):
    """A runner's program, as the lifecycle drives it.

    Subclasses set the class attributes and implement :meth:`add_arguments`,
    :meth:`configure` and :meth:`run`; the other hooks have defaults.

    Attributes
    ----------
    prog : str
        Program name in messages (``"hpcbench fl"``).
    kind : str
        ``kind`` root attribute of its results file (``"fl"``).
    description : str
        One paragraph for ``--help``.
    comm : mpi4py.MPI.Comm
        The job's communicator, set before any hook runs.
    """

    prog: ClassVar[str] = "hpcbench"
    kind: ClassVar[str] = ""
    description: ClassVar[str] = ""
    epilog: ClassVar[str | None] = None
    #: keep unknown flags (``args.passthrough``, a list) instead of refusing them: for runners
    #: that hand them on to the jobs they launch
    passthrough: ClassVar[bool] = False

    def __init__(self, comm) -> None:
        self.comm = comm

    @abstractmethod
    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        """Add the runner's own flags."""

    @abstractmethod
    def configure(self, args: argparse.Namespace) -> None:
        """Build the typed config from the parsed flags (every rank).

        Raises
        ------
        hpcbench.runtime.errors.InputError
            On any bad input; the message names the key and the value.
        """

    def prepare(self) -> None:
        """Load data, traces and models (every rank; may be collective).

        Raises
        ------
        hpcbench.runtime.errors.InputError
            On any bad input; every rank then exits 2 before any output exists.
        """

    def output(self) -> tuple[str, Mapping[str, Any]] | None:
        """The output file-name template and its fields, or None for no results file."""
        return None

    def release(self) -> None:
        """Free what :meth:`prepare` started when the job ends without running (every rank; collective).

        Called when the output is refused after every rank prepared (an
        existing ``--output``, a bad path): threads or process groups that
        call MPI (Horovod's, gloo's) must end before ``MPI_Finalize``.
        """

    def append_output(self) -> str | None:
        """An existing results file this run continues (appends to), or None to create a new one.

        A runner that resumes from a checkpoint returns the file named in it;
        the lifecycle then reopens that file (``status`` back to
        ``"running"``, config replaced, ``resumed_at`` set) instead of
        refusing an existing output, and ``--overwrite`` does not apply.
        """
        return None

    def outputs(self, results: Path) -> Sequence[Output]:
        """Every other file (or folder) the run will write beside the results file ``results`` (rank 0).

        Each is an :class:`~hpcbench.runtime.outputs.Output` (its flag or
        config key, its path; ``may_exist`` for the checkpoint a resumed run
        continues). Before the run starts the lifecycle checks them together
        with the results file and the run's inputs
        (:func:`hpcbench.runtime.outputs.check_outputs`) and locks them all
        for the run; the run then writes each at :meth:`output_path` (its
        key), through a temporary file renamed over it
        (:func:`hpcbench.runtime.outputs.replace_atomically`). A file not
        declared here has no path to be written at.
        """
        return ()

    def output_path(self, key: str) -> Path:
        """The checked, locked path of output ``key`` (declared by :meth:`outputs`; rank 0, once the run started).

        Raises
        ------
        KeyError
            ``key`` was not declared (or the run has not started, or this is not rank 0).
        """
        claimed = getattr(self, "_claimed", None)
        if claimed is None or key not in claimed.locks:
            raise KeyError(f"output {key!r} was not declared by {type(self).__name__}.outputs(); every file a run "
                           f"writes is declared there and checked before the run")
        return claimed.path(key)

    def inputs(self) -> Mapping[str, str]:
        """Input files by key that no output may name; the lifecycle adds every flag and config value naming a file."""
        return {}

    def memory_need(self):
        """This rank's estimated peak memory from the config (a :class:`~hpcbench.runtime.memory.MemoryNeed`), or None.

        Called after :meth:`configure`, before :meth:`prepare` allocates
        anything; the lifecycle refuses the job (exit 2) when a node's ranks
        together need more than the node has available. Computed from the
        config alone: every rank returns None, or every rank an estimate
        (the check is collective); it must not raise.
        """
        return None

    def fault_steps(self) -> int | None:
        """How many fault-point steps this job has (``--fault-inject`` beyond them is refused), or None if unknown."""
        return None

    def config_record(self) -> Mapping[str, Any]:
        """The configuration stored in the results file."""
        return {}

    def provenance(self) -> dict:
        """Extra root attributes for the results file (rank 0)."""
        return {}

    @abstractmethod
    def run(self, results) -> int | None:
        """Run the job; ``results`` is the open ResultsFile on rank 0, else None.

        Returns the exit status (None means 0). Any exception aborts the job.
        """


#: argparse destinations the lifecycle itself adds (the run-time switches add ``setting_*``)
_OWN_DESTS = ("overwrite", "fault_inject", "tensorboard")


def job_arguments(args: argparse.Namespace) -> dict[str, Any]:
    """The runner's own parsed flags: ``vars(args)`` without the lifecycle's and the switches'.

    What a runner stores as its configuration; the switches are recorded as
    provenance attributes (``setting_<name>``) and the fault spec as
    ``fault_injection``.
    """
    return {k: v for k, v in vars(args).items()
            if k not in _OWN_DESTS and not k.startswith("setting_")}


def agree(comm, error: str | None) -> str | None:
    """First error any rank saw (collective), so that every rank stops together.

    Early ranks sleep in a barrier first instead of spinning in MPI's
    blocking allgather (64 ranks importing torch on 2 cores take a minute).
    """
    if comm.size == 1:
        return error
    from hpcbench.runtime.wait import Backoff, sleep_barrier

    sleep_barrier(comm, Backoff(first_s=1e-3, max_s=5e-2))
    errors = comm.allgather(error)
    return next((e for e in errors if e), None)


def format_output_path(template: str, fields: Mapping[str, Any], key: str = "output") -> Path:
    """Fill an output-file template (``results/{job_name}-{start}.h5``).

    Fields are plain names only: attribute or index access
    (``{job_name.__class__}``, ``{job_name[0]}``), conversions (``!r``),
    format specifications and positional fields (``{}``) are refused.

    Raises
    ------
    InputError
        The template names an unknown field, uses anything but plain field
        names, is malformed, or is empty; the message names ``key``, the
        template and the known fields.
    """
    known = ", ".join("{" + k + "}" for k in fields)
    try:
        parts = list(string.Formatter().parse(template))
    except ValueError as exc:
        raise InputError(f"{key}: bad file-name template {template!r} ({exc}); it may use {known}") from None
    for _, name, spec, conversion in parts:
        if name is not None and (not name.isidentifier() or spec or conversion):
            shown = "{" + name + (f"!{conversion}" if conversion else "") + (f":{spec}" if spec else "") + "}"
            raise InputError(f"{key}: file-name template {template!r} uses {shown}; only plain field "
                             f"names are allowed: {known}")
    try:
        text = template.format(**fields)
    except (KeyError, IndexError, ValueError, AttributeError) as exc:
        raise InputError(f"{key}: bad file-name template {template!r} ({type(exc).__name__}: {exc}); "
                         f"it may use {known}") from None
    if not text.strip():
        raise InputError(f"{key}: empty file name")
    from hpcbench.runtime.outputs import refuse_folder_name

    refuse_folder_name(text, key)
    return Path(text)


def _input_files(job: Job, args: argparse.Namespace | None) -> dict[str, str]:
    """The run's input files by key: :meth:`Job.inputs` and every flag or config value that names an existing file."""
    found: dict[str, str] = dict(job.inputs())

    def visit(key: str, value) -> None:
        if isinstance(value, Mapping):
            for k, v in value.items():
                visit(f"{key}.{k}" if key else str(k), v)
        elif isinstance(value, (list, tuple)):
            for i, v in enumerate(value):
                visit(f"{key}[{i}]", v)
        elif isinstance(value, (str, os.PathLike)) and 0 < len(os.fspath(value)) < 4096:
            try:
                if Path(value).is_file():
                    found.setdefault(key, os.fspath(value))
            except (OSError, ValueError):
                pass

    if args is not None:
        visit("", {k.removeprefix("key:"): v for k, v in vars(args).items() if k not in _OWN_DESTS})
    try:
        visit("", job.config_record())
    except Exception:  # noqa: BLE001 - a config without a record has no more inputs
        pass
    return found


def _declared_outputs(job: Job, results: Output, tensorboard: str | None) -> list[Output]:
    """The results file, the job's own outputs and the lifecycle's (``--tensorboard``'s run folder)."""
    outputs = [results, *job.outputs(results.p)]
    if tensorboard:
        from hpcbench.results.tensorboard import run_logdir

        outputs.append(Output("--tensorboard", run_logdir(tensorboard, results.p), folder=True))
    return outputs


def _inputs_besides(outputs: list[Output], inputs: dict[str, str]) -> dict[str, str]:
    """Inputs but the values of the outputs' own keys (``output: o.h5`` names the output) and what a run continues."""
    from hpcbench.runtime.paths import same_file

    keys = {o.key.lstrip("-") for o in outputs}
    return {k: v for k, v in inputs.items()
            if k.rsplit(".", 1)[-1] not in keys and not any(o.may_exist and same_file(o.p, v) for o in outputs)}


def _planned_outputs(job: Job, start: str, tensorboard: str | None) -> list[Output]:
    """Every output of the run, the results file first (``[]`` for a job without one)."""
    existing = job.append_output()
    if existing is not None:
        results = Output("output", existing, may_exist=True)
    else:
        spec = job.output()
        if spec is None:
            return []
        template, fields = spec
        stamp = start.replace(":", "").replace("-", "").replace("+0000", "Z")
        results = Output("output", format_output_path(template, {**fields, "start": stamp}))
    return _declared_outputs(job, results, tensorboard)


def _check_outputs_early(job: Job, args) -> str | None:
    """The output rules checked once the config is known, before :meth:`Job.prepare` (rank 0): a refusal costs
    no data loading. They are checked again, and the outputs locked, when the run opens them."""
    from hpcbench.runtime import provenance
    from hpcbench.runtime.outputs import check_outputs, refuse_in_use

    try:
        outputs = _planned_outputs(job, provenance.utc_now(), args.tensorboard)
        check_outputs(outputs, args.overwrite, _inputs_besides(outputs, _input_files(job, args)))
        refuse_in_use(outputs)
    except InputError as exc:
        return str(exc)
    return None


def _open_results(job: Job, overwrite: bool, start: str, attrs: dict, args=None, tensorboard: str | None = None):
    """Check, lock and open every output of the run (rank 0): nothing is created before all pass."""
    from hpcbench.results import ResultsFile
    from hpcbench.runtime.outputs import check_outputs, claim_outputs

    run_id = uuid.uuid4().hex
    outputs = _planned_outputs(job, start, tensorboard)
    if not outputs:
        return None
    results = outputs[0]
    existing = job.append_output()
    check_outputs(outputs, overwrite, _inputs_besides(outputs, _input_files(job, args)))
    claimed = claim_outputs(outputs, run_id)
    try:
        if existing is not None:
            try:
                opened = ResultsFile.reopen(existing, job.kind, job.config_record(),
                                            {"resumed_at": start, "fault_injection": attrs.get("fault_injection", "")},
                                            lock=claimed["output"])
            except (OSError, ValueError) as exc:
                raise InputError(f"output: cannot append to {str(existing)!r}: {exc}") from None
        else:
            path = results.p
            try:
                opened = ResultsFile(path, job.kind, job.config_record(), {**attrs, "run_id": run_id},
                                     overwrite=overwrite, lock=claimed["output"])
            except FileExistsError:
                raise InputError(f"output: {str(path)!r} exists; pass --overwrite to replace it") from None
            except OSError as exc:
                raise InputError(f"output: cannot create {str(path)!r}: {exc.strerror or exc}") from None
    except BaseException:
        claimed.undo()
        raise
    job._claimed = claimed
    return opened


def _release_outputs(job: Job) -> None:
    """Release the locks of every output of the run (removing the lock files)."""
    claimed = getattr(job, "_claimed", None)
    if claimed is not None:
        claimed.release()


def _check_tensorboard() -> None:
    """``--tensorboard DIR``: the package is installed (its folder is checked with the other outputs)."""
    from hpcbench.results.tensorboard import require_tensorboard

    require_tensorboard()


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
        _release_outputs(job)
    except Exception:  # noqa: BLE001
        pass
    notified = False
    if _CHANNEL is not None and rank != 0:
        try:
            notified = _CHANNEL.notify(code, error)
        except Exception:  # noqa: BLE001 - never let the notice stop the abort
            pass
    if job.comm.size > 1:
        if not notified:
            time.sleep(_STDIO_DRAIN_S)  # the acknowledgement took at least as long
        if _under_slurm_step() and _CHANNEL is not None:
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
    global _FAULT, _RANK, _CHANNEL
    from mpi4py import MPI

    comm = MPI.COMM_WORLD if comm is None else comm
    argv = list(sys.argv[1:] if argv is None else argv)
    job = job_cls(comm)
    _RANK = comm.rank
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
        _FAULT = _Fault(args.fault_inject, comm.size) if args.fault_inject else None
        if args.tensorboard:
            _check_tensorboard()
        settings.apply(args)
        job.configure(args)
        if _FAULT is not None:
            _FAULT.check_steps(job.fault_steps())
    except _HelpShown as shown:
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
            early = _check_outputs_early(job, args) if comm.rank == 0 else None
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
            results = _open_results(job, args.overwrite, start, attrs, args, args.tensorboard)
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
            _release_outputs(job)
    error = agree(comm, error)
    if error:
        if comm.rank == 0:
            sys.stderr.write(f"{job.prog}: error: {error}\n")
        try:
            job.release()
        except Exception as exc:  # noqa: BLE001 - a bug in release: end every rank, never hang
            return _fail(job, exc, None)
        return EXIT_INPUT
    _CHANNEL = _listen_for_failures(comm, results)
    previous = signal.signal(signal.SIGTERM, _on_sigterm) if _is_main_thread() else None
    try:
        status = job.run(results)
        if results is not None:
            results.close("completed")  # raises when a full disk kept the file from completing
    except BaseException as exc:  # noqa: BLE001 - every failure ends every rank
        return _fail(job, exc, results)
    finally:
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)
    _release_outputs(job)
    _stop_listening()
    return EXIT_OK if status is None else int(status)


def _listen_for_failures(comm, results):
    """Start the failure channel (collective) and the results file's heartbeat; rank 0 marks the file on a notice."""
    from hpcbench.runtime.failure import FailureChannel
    from hpcbench.runtime.finalize import before_finalize

    if results is not None:
        results.start_heartbeat()
    if comm.size == 1:
        return None

    def mark(rank: int, status: int, message: str) -> None:
        from hpcbench.runtime.outputs import discard_pending

        if results is not None:
            results.mark_failed(f"rank {rank}: {message}")
        discard_pending()  # the abort that follows would leave a half-written checkpoint's temporary file

    channel = FailureChannel(comm, mark, stop_all=_under_slurm_step())
    before_finalize(_stop_listening)
    return channel


def _stop_listening() -> None:
    global _CHANNEL
    if _CHANNEL is not None:
        _CHANNEL.close()
        _CHANNEL = None


def _is_main_thread() -> bool:
    import threading

    return threading.current_thread() is threading.main_thread()


def _under_slurm_step() -> bool:
    return "SLURM_STEP_ID" in os.environ and "SLURM_PROCID" in os.environ


def _abort_quietly(comm, status: int) -> None:
    """``MPI_Abort(status)`` with MPICH's own one-line abort notice kept off stderr."""
    time.sleep(_STDIO_DRAIN_S)
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
    if status and _under_slurm_step() and _is_main_thread():
        # srun --kill-on-bad-exit sends SIGTERM to the tasks still finalizing once the first leaves with 2:
        # each leaves with its own status instead of dying by the signal (143)
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    mpi = sys.modules.get("mpi4py.MPI")
    if mpi is not None and mpi.Is_initialized() and not mpi.Is_finalized():
        world = mpi.COMM_WORLD
        if status and world.size > 1 and not _under_slurm_step():
            if world.rank == 0:
                _abort_quietly(world, status)
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


def main(job: str | type[Job], argv: list[str] | None = None) -> int:
    """Entry point of a runner's ``__main__``: run the lifecycle, then end the process.

    ``job`` is the Job class or its ``"module:Class"`` path; given as a path,
    it is imported only after the wake-up signal is blocked (before mpi4py
    and torch start threads; see :mod:`hpcbench.runtime.wakeup`).

    Never returns (see :func:`exit_process`); call :func:`run` to stay in-process.
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

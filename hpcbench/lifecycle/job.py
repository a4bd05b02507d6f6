"""The :class:`Job` a runner subclasses: its hooks, as the lifecycle (:mod:`hpcbench.lifecycle.driver`) calls them."""

from __future__ import annotations

import argparse
from abc import ABC, abstractmethod
from pathlib import Path
from typing import Any, ClassVar, Mapping, Sequence

from hpcbench.runtime.outputs import Output

__all__ = ["Job", "job_arguments", "OWN_DESTS"]


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
OWN_DESTS = ("overwrite", "fault_inject", "tensorboard")


def job_arguments(args: argparse.Namespace) -> dict[str, Any]:
    """The runner's own parsed flags: ``vars(args)`` without the lifecycle's and the switches'.

    What a runner stores as its configuration; the switches are recorded as
    provenance attributes (``setting_<name>``) and the fault spec as
    ``fault_injection``.
    """
    return {k: v for k, v in vars(args).items()
            if k not in OWN_DESTS and not k.startswith("setting_")}

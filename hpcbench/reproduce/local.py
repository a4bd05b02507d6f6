"""Running a reproduction's jobs on this machine, one after the other, through the package launcher.

Each run is ``mpiexec -n RANKS python -m hpcbench.cli RUNNER ...``
(:func:`hpcbench.runtime.launch.run_mpi`) with its output in the run's log
file; each drawing is ``python analysis/X.py ...``. One at a time: timings
of jobs sharing the cores would measure each other.
"""

from __future__ import annotations

import subprocess
import time
from dataclasses import dataclass, field

from hpcbench.reproduce.manifest import ROOT
from hpcbench.reproduce.plan import Drawing, Run

__all__ = ["Handle", "LocalLauncher", "Interrupted", "INTERRUPTED"]

#: exit status recorded for a run or drawing ended by Ctrl-C (128 + SIGINT, as a shell reports it)
INTERRUPTED = 130


class Interrupted(KeyboardInterrupt):
    """Ctrl-C while a command ran; it has been ended, and ``handle`` records it (``rc`` :data:`INTERRUPTED`)."""

    def __init__(self, handle: "Handle") -> None:
        super().__init__(handle.key)
        self.handle = handle


@dataclass
class Handle:
    """A launched command: what it was and, once it ended, its exit status and wall time.

    ``rc`` is None while it runs; 124 when it was ended at its time limit; -1
    when it ended without an exit status (a Slurm job cancelled before it ran).
    """

    key: str
    command: list[str]
    log: str
    rc: int | None = None
    wall_s: float | None = None
    note: str = ""
    job_id: str = ""
    extra: dict = field(default_factory=dict)

    @property
    def done(self) -> bool:
        """True once it ended."""
        return self.rc is not None


class LocalLauncher:
    """Runs each command to its end when it is started (``asynchronous = False``).

    Parameters
    ----------
    python : str
        The interpreter of the jobs and drawings.
    """

    name = "local"
    asynchronous = False

    def __init__(self, python: str) -> None:
        self.python = python

    def start_run(self, run: Run, argv: list[str]) -> Handle:
        """Run ``mpiexec -n run.ranks python ARGV`` to its end (or its ``timeout_s``); a run of ``nodes > 1``
        on that many hosts emulated on this machine (:mod:`hpcbench.runtime.emulated_hosts`)."""
        from hpcbench.runtime import launch

        run.log.parent.mkdir(parents=True, exist_ok=True)
        run.output.parent.mkdir(parents=True, exist_ok=True)
        hosts = run.ranks_per_node if run.nodes is not None and run.nodes > 1 else None
        handle = Handle(run.key, launch.mpi_command(run.ranks, argv, self.python, hosts=hosts), str(run.log))
        t0 = time.monotonic()
        with open(run.log, "w", encoding="utf-8") as log:
            try:
                proc = launch.run_mpi(run.ranks, argv, timeout=run.timeout_s, cwd=ROOT, env=run.job.env,
                                      stdout=log, stderr=subprocess.STDOUT, hosts=hosts)
                handle.rc = proc.returncode
            except launch.LaunchTimeout:
                handle.rc, handle.note = 124, f"ended at its time limit ({run.timeout_s:g} s)"
            except KeyboardInterrupt:   # run_mpi has ended the job's process group
                handle.rc, handle.note = INTERRUPTED, "interrupted (Ctrl-C): its process group was ended"
                handle.wall_s = time.monotonic() - t0
                raise Interrupted(handle) from None
        handle.wall_s = time.monotonic() - t0
        return handle

    def start_draw(self, drawing: Drawing, after: list[Handle]) -> Handle:
        """Run the figure's script to its end (``after`` have all ended already)."""
        del after
        log = drawing.png.with_suffix(".log")
        log.parent.mkdir(parents=True, exist_ok=True)
        cmd = [self.python, *drawing.argv()]
        handle = Handle(f"draw/{drawing.figure}", cmd, str(log))
        t0 = time.monotonic()
        with open(log, "w", encoding="utf-8") as f:
            try:
                handle.rc = subprocess.run(cmd, cwd=str(ROOT), stdout=f, stderr=subprocess.STDOUT,
                                           stdin=subprocess.DEVNULL, timeout=900).returncode
            except subprocess.TimeoutExpired:
                handle.rc, handle.note = 124, "ended at its time limit (900 s)"
            except KeyboardInterrupt:   # subprocess.run has killed the script
                handle.rc, handle.note = INTERRUPTED, "interrupted (Ctrl-C)"
                handle.wall_s = time.monotonic() - t0
                raise Interrupted(handle) from None
        handle.wall_s = time.monotonic() - t0
        return handle

    def wait(self, handles: list[Handle]) -> list[Handle]:
        """Every handle has ended when it is returned: nothing to wait for."""
        return [h for h in handles if h.done]

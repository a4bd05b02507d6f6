"""Launch MPI jobs from a driver process: ``mpiexec -n N python ARGS...``.

The one launcher of the project: ``hpcbench reproduce`` runs its jobs
through it, ``hpcbench fl-bench`` its world sizes, and the test suite every
job it starts (``tests/mpitools.py`` only adds pytest's skip). A launched job
runs in its own session (process group), so a timeout or an interrupt ends
``mpiexec`` and every rank it started, never only the launcher.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import IO, TYPE_CHECKING, Mapping, Sequence

if TYPE_CHECKING:
    from hpcbench.runtime.emulated_net import LinkSpec

__all__ = ["find_mpiexec", "mpi_command", "job_environment", "start_mpi", "run_mpi", "LaunchTimeout",
           "end_process_group"]


class LaunchTimeout(TimeoutError):
    """A launched job outlived its time limit; it was ended with its whole process group.

    Attributes
    ----------
    cmd : list of str
        The command line.
    timeout : float
        The limit, in seconds.
    stdout, stderr : str
        What the job wrote before it was ended (empty when it wrote to files).
    """

    def __init__(self, cmd: Sequence[str], timeout: float, stdout: str = "", stderr: str = "") -> None:
        super().__init__(f"timed out after {timeout:g} s: {' '.join(cmd)}")
        self.cmd, self.timeout, self.stdout, self.stderr = list(cmd), timeout, stdout, stderr


def find_mpiexec() -> str:
    """The MPI launcher to use: ``$HPCBENCH_MPIEXEC``, the one beside this Python, or ``mpiexec`` on PATH.

    Raises
    ------
    FileNotFoundError
        If none is found.
    """
    env = os.environ.get("HPCBENCH_MPIEXEC")
    if env:
        return env
    here = Path(sys.executable).parent / "mpiexec"
    if here.exists():
        return str(here)
    found = shutil.which("mpiexec") or shutil.which("mpirun")
    if not found:
        raise FileNotFoundError("no mpiexec found: install the mpich wheel or set HPCBENCH_MPIEXEC")
    return found


def end_process_group(proc: subprocess.Popen, grace_s: float = 5.0) -> None:
    """End a child started with ``start_new_session=True`` and everything it started.

    Does nothing if ``proc`` has exited; otherwise sends SIGTERM to its process
    group, then SIGKILL if it has not exited after ``grace_s`` seconds. A
    launcher calls it in a ``finally`` block, so an ``mpiexec`` job or a Ray
    cluster never outlives the benchmark that started it.

    Parameters
    ----------
    proc : subprocess.Popen
        The child; its pid is its process group id (``start_new_session=True``).
    grace_s : float
        Seconds to wait after each signal.
    """
    if proc.poll() is not None:
        return
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(timeout=grace_s)
            return
        except subprocess.TimeoutExpired:
            continue


def mpi_command(n: int, args: Sequence[str], python: str | None = None,
                hosts: Sequence[int] | None = None) -> list[str]:
    """``[mpiexec, -n, N, python, *args]``: a job of ``n`` ranks each running ``python ARGS...``.

    Parameters
    ----------
    n : int
        World size (>= 1).
    args : sequence of str
        Arguments after the interpreter (``["-m", "hpcbench.fl", "job.yaml"]``).
    python : str, optional
        The interpreter (default: this one, ``sys.executable``).
    hosts : sequence of int, optional
        Ranks per emulated host (``(2, 2)``, ``(3, 1)``), adding up to ``n``:
        the job runs on hosts emulated on this machine
        (:mod:`hpcbench.runtime.emulated_hosts`; MPICH's Hydra ``mpiexec``).

    Raises
    ------
    ValueError
        ``n`` is below 1, or ``hosts`` does not add up to ``n``.
    FileNotFoundError
        No ``mpiexec`` is found (:func:`find_mpiexec`).
    """
    if int(n) < 1:
        raise ValueError(f"world size must be >= 1, got {n}")
    placement: list[str] = []
    if hosts is not None:
        from hpcbench.runtime.emulated_hosts import mpiexec_arguments
        if sum(int(k) for k in hosts) != int(n):
            raise ValueError(f"hosts: {list(hosts)} ranks per host do not add up to the world size {n}")
        placement = mpiexec_arguments(hosts)
    return [find_mpiexec(), *placement, "-n", str(int(n)), python or sys.executable, *map(str, args)]


def job_environment(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """This process's environment for a launched job: one OpenMP thread per rank, unbuffered Python.

    ``OMP_NUM_THREADS=1`` (ranks share the cores; a rank's torch would start
    one thread per core otherwise) and ``PYTHONUNBUFFERED=1`` unless already
    set, then ``extra`` on top.
    """
    env = dict(os.environ)
    env.setdefault("PYTHONUNBUFFERED", "1")
    env["OMP_NUM_THREADS"] = "1"
    env.update({k: str(v) for k, v in (extra or {}).items()})
    return env


def start_mpi(n: int, args: Sequence[str], cwd: str | Path | None = None, env: Mapping[str, str] | None = None,
              stdout: IO | int | None = None, stderr: IO | int | None = None,
              hosts: Sequence[int] | None = None) -> subprocess.Popen:
    """Start ``mpiexec -n N python ARGS...`` in a session of its own and return it at once.

    ``stdin`` is closed; ``stdout``/``stderr`` are as for :class:`subprocess.Popen`.
    End it with :func:`end_process_group` (what :func:`run_mpi` does on a
    timeout or an interrupt). ``env`` is added to :func:`job_environment`;
    ``hosts``: ranks per emulated host (:func:`mpi_command`).
    """
    return subprocess.Popen(mpi_command(n, args, hosts=hosts), cwd=None if cwd is None else str(cwd),
                            env=job_environment(env), stdin=subprocess.DEVNULL, stdout=stdout, stderr=stderr,
                            text=True, start_new_session=True)


def run_mpi(n: int, args: Sequence[str], timeout: float = 300.0, cwd: str | Path | None = None,
            env: Mapping[str, str] | None = None, stdout: IO | None = None,
            stderr: IO | int | None = None, hosts: Sequence[int] | None = None,
            link: "str | LinkSpec | None" = None) -> subprocess.CompletedProcess:
    """Run ``mpiexec -n N python ARGS...`` to its end and return the finished process.

    Parameters
    ----------
    n : int
        World size.
    args : sequence of str
        Arguments after the interpreter.
    timeout : float
        Seconds before the job and every process it started are ended.
    cwd : path, optional
        Working directory (default: this process's).
    env : mapping, optional
        Variables added to :func:`job_environment`.
    stdout, stderr : file, optional
        Where the output goes (``stderr=subprocess.STDOUT`` joins it to
        ``stdout``); by default both are captured as text in the result.
    hosts : sequence of int, optional
        Ranks per emulated host (:func:`mpi_command`).
    link : str or LinkSpec, optional
        With ``hosts``: each host in a network namespace of its own, joined
        by a link shaped as ``"rate=1gbit,delay=0.1ms"`` says
        (:class:`hpcbench.runtime.emulated_net.EmulatedNetwork`; ``""``: not
        shaped), made for this job and removed after it, whatever its end.

    Returns
    -------
    subprocess.CompletedProcess
        ``returncode`` is the job's exit status (0 done, 1 failure, 2 bad
        input for hpcbench's runners); ``stdout``/``stderr`` hold the text
        when captured, else None.

    Raises
    ------
    LaunchTimeout
        The job ran past ``timeout``; it has been ended (with what it wrote).
    ValueError
        ``link`` without ``hosts``, or a bad link (the message names the key).
    RuntimeError
        The link's network cannot be made here (not root; ``LinkUnsupported``: a delay without ``netem``).
    """
    if link is not None:
        from hpcbench.runtime.emulated_hosts import host_names
        from hpcbench.runtime.emulated_net import EmulatedNetwork
        if hosts is None:
            raise ValueError("link: an emulated link needs emulated hosts (hosts=...)")
        with EmulatedNetwork(host_names(len(hosts)), link) as net:
            return run_mpi(n, args, timeout, cwd, {**(env or {}), **net.env()}, stdout, stderr, hosts)
    capture = stdout is None and stderr is None
    out = subprocess.PIPE if capture else stdout
    err = subprocess.PIPE if capture else stderr
    proc = start_mpi(n, args, cwd, env, out, err, hosts=hosts)
    cmd = proc.args
    deadline = time.monotonic() + timeout
    try:
        text_out, text_err = proc.communicate(timeout=max(0.0, deadline - time.monotonic()))
    except subprocess.TimeoutExpired:
        end_process_group(proc)
        text_out, text_err = proc.communicate() if capture else ("", "")
        raise LaunchTimeout(cmd, timeout, text_out or "", text_err or "") from None
    except BaseException:
        end_process_group(proc)
        raise
    return subprocess.CompletedProcess(cmd, proc.returncode, text_out, text_err)

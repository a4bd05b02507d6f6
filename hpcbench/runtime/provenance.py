"""Provenance of a run: what ran, where, when, with which software.

mpi4py is imported where it is used, so that a process that only wants
:func:`git_commit` (``hpcbench reproduce``'s report) does not start MPI.
"""

from __future__ import annotations

import datetime as _dt
import os
import subprocess
from pathlib import Path

import hpcbench
from hpcbench.runtime.hosts import gather_hostnames  # noqa: F401 - re-exported

__all__ = ["utc_now", "git_commit", "mpi_library_version", "gather_hostnames", "collect"]


def utc_now() -> str:
    """Current time as an ISO 8601 UTC string (seconds resolution)."""
    return _dt.datetime.now(_dt.timezone.utc).replace(microsecond=0).isoformat()


def git_commit() -> str:
    """Commit hash of the hpcbench checkout, or ``""`` when not run from git."""
    root = Path(hpcbench.__file__).resolve().parent.parent
    try:
        out = subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"],
                             capture_output=True, text=True, timeout=5, check=False)
    except (OSError, subprocess.SubprocessError):
        return ""
    commit = out.stdout.strip()
    if out.returncode != 0 or len(commit) != 40:
        return ""
    dirty = subprocess.run(["git", "-C", str(root), "status", "--porcelain", "--untracked-files=no"],
                           capture_output=True, text=True, timeout=5, check=False)
    return commit + ("-dirty" if dirty.stdout.strip() else "")


def mpi_library_version() -> str:
    """First line of ``MPI.Get_library_version()`` (e.g. ``MPICH Version: 4.2.0``)."""
    from mpi4py import MPI

    return MPI.Get_library_version().strip().splitlines()[0].strip()


def collect(comm, hostnames: list[str], seed: int | None, start_time: str) -> dict:
    """Provenance attributes common to every hpcbench result file.

    Parameters
    ----------
    comm : mpi4py.MPI.Comm
        The job's communicator (its size is recorded as ``world_size``).
    hostnames : list of str
        Host name of every rank, from :func:`gather_hostnames`.
    seed : int or None
        The run's seed.
    start_time : str
        ISO 8601 UTC start time.

    Returns
    -------
    dict
        Attribute name to value; strings and integers only.
    """
    import h5py
    import numpy

    attrs = {
        "hpcbench_version": hpcbench.__version__,
        "git_commit": git_commit(),
        "mpi_library_version": mpi_library_version(),
        "mpi4py_version": __import__("mpi4py").__version__,
        "torch_version": _torch_version(),
        "numpy_version": numpy.__version__,
        "h5py_version": h5py.__version__,
        "world_size": int(comm.size),
        "hostnames": ",".join(hostnames),
        "unique_hosts": len(set(hostnames)),
        "start_time": start_time,
        "slurm_job_id": os.environ.get("SLURM_JOB_ID", ""),
        "slurm_job_nodelist": os.environ.get("SLURM_JOB_NODELIST", ""),
    }
    from hpcbench.runtime import settings

    attrs.update(settings.snapshot())
    if seed is not None:
        attrs["seed"] = int(seed)
    return attrs


def _torch_version() -> str:
    """Installed torch's version without importing it (a job that does not use torch stays torch-free).

    The version of the imported module when a runner has imported it, else
    the installed distribution's metadata; ``""`` when torch is not installed.
    """
    import sys
    from importlib import metadata

    if "torch" in sys.modules:
        return str(sys.modules["torch"].__version__)
    try:
        return metadata.version("torch")
    except metadata.PackageNotFoundError:
        return ""

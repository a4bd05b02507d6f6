"""The machine a reproduction ran on, for its report: CPU, cores, memory, MPI library, versions.

MPI's library version is read without initialising MPI (``mpi4py.rc.initialize
= False``; ``MPI_Get_library_version`` may be called before ``MPI_Init``): the
driver of a reproduction is no MPI process.
"""

from __future__ import annotations

import os
import platform
from importlib import metadata

__all__ = ["describe_machine", "mpi_library"]

#: distributions whose versions the report lists
_PACKAGES = ("hpcbench", "numpy", "torch", "torchvision", "mpi4py", "mpich", "h5py", "scipy", "numba", "PuLP",
             "pydantic", "matplotlib", "Jinja2", "tensorboard", "horovod")


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def mpi_library() -> str:
    """First line of ``MPI_Get_library_version`` without initialising MPI; ``unknown (...)`` on failure."""
    try:
        import mpi4py

        if "mpi4py.MPI" not in __import__("sys").modules:
            mpi4py.rc.initialize = False
            mpi4py.rc.finalize = False
        from mpi4py import MPI

        return " ".join(MPI.Get_library_version().strip().splitlines()[0].split())
    except Exception as exc:  # noqa: BLE001 - a report line, never a failure
        return f"unknown ({type(exc).__name__}: {exc})"


def _version(name: str) -> str:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return "not installed"


def describe_machine() -> dict:
    """What the report says about this machine.

    Returns
    -------
    dict
        ``host``, ``cpu``, ``physical_cores``, ``logical_cores``,
        ``memory_gib``, ``os``, ``python``, ``mpi_library``, ``load_average``
        (1, 5, 15 min), ``git_commit``, and ``versions`` (distribution ->
        version, ``not installed`` where absent).
    """
    import psutil

    from hpcbench.runtime.provenance import git_commit

    return {
        "host": platform.node(),
        "cpu": _cpu_model(),
        "physical_cores": psutil.cpu_count(logical=False),
        "logical_cores": psutil.cpu_count(logical=True),
        "memory_gib": round(psutil.virtual_memory().total / 2 ** 30, 1),
        "os": f"{platform.system()} {platform.release()}",
        "python": platform.python_version(),
        "mpi_library": mpi_library(),
        "load_average": [round(x, 2) for x in os.getloadavg()],
        "git_commit": git_commit(),
        "versions": {name: _version(name) for name in _PACKAGES},
    }

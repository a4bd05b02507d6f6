"""What the GPU side of a run was: card, driver, CUDA, cuDNN, NCCL, and whether MPI is CUDA-aware.

:func:`gpu_provenance` gives the attributes a result file records for a run
on a :class:`hpcbench.runtime.device.Device` (empty strings and a count of 0
on CPU, so every file has the same attributes). :func:`cuda_aware_mpi` says
whether mpi4py's MPI library takes device pointers: mpi4py's
``MPI.Query_cuda_support`` (``MPIX_Query_cuda_support``) where the library
exports it, else the library's own description (MPICH prints its configure
line: ``--with-cuda``; Open MPI's build reports ``smcuda``/``cuda`` in
``MPI_Get_library_version`` only through ``ompi_info``, so Open MPI without
the query is reported as unknown). MPICH's GPU support is switched off by
``MPIR_CVAR_ENABLE_GPU=0``. The MPICH wheel on PyPI (what ``pip install
mpich`` gives) is built without CUDA: it is never CUDA-aware, and hpcbench's
synchronisers then stage device buffers through host memory.
"""

from __future__ import annotations

import os
import shutil
import subprocess

__all__ = ["gpu_provenance", "cuda_aware_mpi", "driver_version"]


def driver_version() -> str:
    """The NVIDIA driver's version (``nvidia-smi --query-gpu=driver_version``), ``""`` when unknown."""
    exe = shutil.which("nvidia-smi")
    if exe is None:
        return ""
    try:
        out = subprocess.run([exe, "--query-gpu=driver_version", "--format=csv,noheader"], capture_output=True,
                             text=True, timeout=10, check=False)
    except (OSError, subprocess.SubprocessError):
        return ""
    lines = out.stdout.strip().splitlines()
    return lines[0].strip() if out.returncode == 0 and lines else ""


def cuda_aware_mpi(library_version: str | None = None, env=None) -> tuple[str, str]:
    """Whether mpi4py's MPI accepts CUDA device buffers, and how that was decided.

    Parameters
    ----------
    library_version : str, optional
        ``MPI.Get_library_version()`` (default: asked).
    env : mapping, optional
        Environment (default ``os.environ``).

    Returns
    -------
    (str, str)
        ``"yes"``, ``"no"`` or ``"unknown"``, and the evidence (e.g.
        ``"MPIX_Query_cuda_support() = 0"``, ``"MPICH configured without --with-cuda"``).
    """
    env = os.environ if env is None else env
    from mpi4py import MPI

    query = getattr(MPI, "Query_cuda_support", None)
    if query is not None and library_version is None:
        try:
            ok = bool(query())
            return ("yes" if ok else "no"), f"MPIX_Query_cuda_support() = {int(ok)}"
        except Exception:  # noqa: BLE001 - a library without the symbol: fall through to its description
            pass
    text = library_version if library_version is not None else MPI.Get_library_version()
    if "MPICH" in text:
        if env.get("MPIR_CVAR_ENABLE_GPU", "").strip() == "0":
            return "no", "MPICH with MPIR_CVAR_ENABLE_GPU=0"
        if "--with-cuda" in text:
            return "yes", "MPICH configured --with-cuda"
        return "no", "MPICH configured without --with-cuda (e.g. the PyPI mpich wheel)"
    if "Open MPI" in text:
        return "unknown", "Open MPI without MPIX_Query_cuda_support in mpi4py"
    return "unknown", "library not recognised"


def gpu_provenance(device) -> dict:
    """Result-file attributes of the GPU side of a run on ``device``.

    Parameters
    ----------
    device : hpcbench.runtime.device.Device

    Returns
    -------
    dict
        ``device`` (``cpu`` / ``cuda:0``), ``gpu_model``, ``gpu_count``,
        ``gpu_memory_bytes``, ``gpu_driver``, ``cuda_version``,
        ``cudnn_version``, ``nccl_version`` (strings, ``""`` on CPU; the
        CUDA and cuDNN versions are torch's build), ``gpu_precision`` (float32
        and whether cuDNN's convolutions and cuBLAS's matmuls may use TF32,
        which Ampere and later cards do by default for convolutions only:
        the precision column of NVIDIA's published tables), ``gpu_local_ranks``
        (ranks of this host) and ``cuda_aware_mpi`` with its evidence.
    """
    aware, why = cuda_aware_mpi()
    attrs = {"device": device.torch, "gpu_model": "", "gpu_count": int(device.gpus), "gpu_memory_bytes": 0,
             "gpu_driver": "", "cuda_version": "", "cudnn_version": "", "nccl_version": "", "gpu_precision": "",
             "gpu_local_ranks": int(device.local_size), "cuda_aware_mpi": aware, "cuda_aware_mpi_evidence": why}
    if not device.is_cuda:
        return attrs
    import torch

    props = torch.cuda.get_device_properties(device.index)
    cudnn = torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None
    nccl = ""
    try:
        v = torch.cuda.nccl.version()
        nccl = ".".join(map(str, v)) if isinstance(v, tuple) else str(v)
    except (AttributeError, RuntimeError):
        pass
    attrs.update(gpu_model=str(props.name), gpu_memory_bytes=int(props.total_memory), gpu_driver=driver_version(),
                 cuda_version=str(torch.version.cuda or ""), cudnn_version=str(cudnn or ""), nccl_version=nccl,
                 gpu_precision=(f"float32 (TF32 convolutions {'on' if torch.backends.cudnn.allow_tf32 else 'off'}, "
                                f"TF32 matmuls {'on' if torch.backends.cuda.matmul.allow_tf32 else 'off'})"))
    return attrs

"""Devices without a GPU: selection (node-local rank modulo the GPUs), ``auto``, the error, provenance, timing.

The tests that need a GPU are in ``tests/test_gpu.py`` (skipped here with the reason).
"""

from __future__ import annotations

import pytest
import torch
from mpi4py import MPI

from hpcbench.runtime.device import CPU, Device, node_local, pick_device, select_device
from hpcbench.runtime.devicetime import DeviceClock
from hpcbench.runtime.errors import InputError
from hpcbench.runtime.gpuinfo import cuda_aware_mpi, gpu_provenance

NO_GPU = not torch.cuda.is_available()


@pytest.mark.parametrize("gpus,expected", [(4, [0, 1, 2, 3, 0, 1]), (1, [0] * 6), (8, [0, 1, 2, 3, 4, 5])])
def test_cuda_takes_the_local_rank_modulo_the_visible_gpus(gpus, expected):
    got = [pick_device("cuda", r, 6, gpus) for r in range(6)]
    assert [d.index for d in got] == expected
    assert all(d.kind == "cuda" and d.torch == f"cuda:{d.index}" and d.gpus == gpus for d in got)
    assert got[0].shares_gpu() == (gpus < 6)


def test_auto_falls_back_to_the_cpu_and_cpu_never_takes_a_gpu():
    assert pick_device("auto", 3, 4, 0) == Device("cpu", None, 3, 4, 0)
    assert pick_device("auto", 3, 4, 2).torch == "cuda:1"
    assert pick_device("cpu", 3, 4, 2).torch == "cpu" and not pick_device("cpu", 0, 1, 2).shares_gpu()


def test_cuda_without_a_gpu_is_an_input_error_naming_the_key_and_value():
    with pytest.raises(InputError, match=r"device: 'cuda' asks for a GPU, but none is visible"):
        pick_device("cuda", 0, 1, 0)
    with pytest.raises(InputError, match=r"stage_device: 'tpu' is not one of cpu, cuda, auto"):
        pick_device("tpu", 0, 1, 0, key="stage_device")


@pytest.mark.skipif(not NO_GPU, reason="a GPU is visible: the no-GPU error cannot happen here")
def test_select_device_on_this_cpu_machine():
    assert node_local(MPI.COMM_SELF) == (0, 1)
    assert select_device(MPI.COMM_SELF, "auto").torch == "cpu"
    assert select_device(MPI.COMM_SELF, "cuda", needed=False) == Device("cpu", None, 0, 1, 0)
    with pytest.raises(InputError, match="device: 'cuda'"):
        select_device(MPI.COMM_SELF, "cuda")


def test_provenance_on_the_cpu_has_every_gpu_field_empty():
    attrs = gpu_provenance(CPU)
    for k in ("gpu_model", "gpu_driver", "cuda_version", "cudnn_version", "nccl_version", "gpu_precision"):
        assert attrs[k] == ""
    assert attrs["device"] == "cpu" and attrs["gpu_count"] == 0 and attrs["gpu_memory_bytes"] == 0
    assert attrs["cuda_aware_mpi"] in ("yes", "no", "unknown") and attrs["cuda_aware_mpi_evidence"]


@pytest.mark.parametrize("text,env,expected", [
    ("MPICH Version: 4.2.0\nMPICH configure: --with-device=ch4:ofi --with-pm=hydra", {}, "no"),
    ("MPICH Version: 4.2.0\nMPICH configure: --with-cuda=/usr/local/cuda --with-device=ch4:ucx", {}, "yes"),
    ("MPICH Version: 4.2.0\nMPICH configure: --with-cuda=/usr/local/cuda", {"MPIR_CVAR_ENABLE_GPU": "0"}, "no"),
    ("Open MPI v4.1.5, package: Open MPI", {}, "unknown"),
    ("Intel(R) MPI Library 2021.10", {}, "unknown"),
])
def test_cuda_aware_mpi_from_the_library_description(text, env, expected):
    assert cuda_aware_mpi(text, env)[0] == expected


def test_the_device_clock_synchronises_before_it_reads_the_clock():
    events = []
    clock = DeviceClock(Device("cuda", 0, 0, 1, 1), clock=lambda: events.append("read") or 1.5,
                        synchronize=lambda: events.append("sync"))
    assert clock.now() == 1.5 and events == ["sync", "read"]
    host = DeviceClock(CPU)
    a = host.mark()
    assert host.seconds(a, host.mark()) >= 0.0 and host.now() > 0


def test_nccl_on_the_cpu_is_unavailable_with_its_reason():
    from hpcbench.sync import Unavailable, get

    with pytest.raises(Unavailable, match="nccl: needs device: cuda"):
        get("nccl")(MPI.COMM_SELF, None, None, device=CPU)
    shared = Device("cuda", 0, 1, 2, 1)
    with pytest.raises(Unavailable, match="NCCL refuses two ranks on one GPU"):
        get("nccl")._check(type("S", (), {"device": shared})())
    assert get("nccl").averages == "wrapped" and not get("nccl").emulates and not get("nccl").uses_transport


@pytest.mark.parametrize("overrides,needle", [
    ({"device": "cuda", "schedule": "priority"}, "device: 'cuda' needs schedule: fifo"),
    ({"host_staging": "true", "sync": "[ring:priority]"}, "host_staging: true needs schedule: fifo"),
    ({"device": "cuda", "host_staging": "false"}, "host_staging: false with device: 'cuda'"),
    ({"device": "gpu"}, "device"),
])
def test_device_config_errors_name_the_key(overrides, needle):
    from hpcbench.runtime.config import ConfigError
    from hpcbench.train.config import load_config

    with pytest.raises(ConfigError, match=needle):
        load_config(None, overrides)


@pytest.mark.skipif(not NO_GPU, reason="a GPU is visible: --device cuda runs here")
@pytest.mark.parametrize("module,args,needle", [
    ("hpcbench.bench.collectives", ["--device", "cuda", "-e", "4K"], "--device: 'cuda' asks for a GPU"),
    ("hpcbench.bench.collectives", ["--device", "cuda", "-o", "bcast"], "-o/--op: 'bcast' is not available"),
    ("hpcbench.train", ["--model", "digits_mlp", "--device", "cuda"], "device: 'cuda' asks for a GPU"),
])
def test_cuda_without_a_gpu_exits_2_on_every_rank_without_output(tmp_path, module, args, needle):
    from mpitools import run_mpi

    out = tmp_path / "gpu.h5"
    proc = run_mpi(2, ["-m", module, *args, "--output", str(out)], timeout=120)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert needle in proc.stderr and "Traceback" not in proc.stderr
    assert not out.exists()

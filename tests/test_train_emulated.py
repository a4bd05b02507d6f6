"""``compute: emulated``: the same buffers as the real model, reduced in the same order, without torch."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import numpy as np
import pytest

from hpcbench.runtime.dilation import TimeDilation
from hpcbench.sync.base import Synchroniser
from hpcbench.train.context import BatchState
from hpcbench.train.profile import ComputeProfile


class RecordingSync(Synchroniser):
    """Averages gradients by doing nothing, and records what it was asked to reduce."""

    name = "recording"

    def __init__(self, averages: str = "gradients") -> None:
        super().__init__(comm=None)
        self.averages = averages
        self.calls: list[tuple[int, int, str]] = []

    def start(self, flat, index):
        arr = np.asarray(flat)                   # a torch tensor (real) or a numpy array (emulated)
        self.calls.append((index, arr.size, str(arr.dtype)))
        return index

    def mix_memory_s(self, profile):
        return 2 * profile.axpy_s if self.averages == "models" else 0.0


def _profile(model) -> ComputeProfile:
    params = [p for p in model.parameters() if p.requires_grad]
    n = len(params)
    # gradients become ready in reverse registration order, as backward produces them
    return ComputeProfile(1e-4, 2e-4, 1e-5, np.linspace(2e-4, 0.0, n), tuple(p.numel() for p in params))


@pytest.mark.parametrize("overlap", [True, False])
def test_emulated_worker_reduces_the_real_workers_buffers_in_the_same_order(overlap):
    import torch

    from hpcbench.train.data import build_data
    from hpcbench.train.emulated import EmulatedWorker
    from hpcbench.train.models import build_model
    from hpcbench.train.worker import Worker

    class _Comm:
        rank, size = 0, 1

    model = build_model("digits_cnn", 0)
    prof = _profile(model)
    bucket_bytes = 4 * 1000                      # several buckets for this small model
    real_sync, emu_sync = RecordingSync(), RecordingSync()
    data = build_data("digits", 16, 8, 0, _Comm())
    state = BatchState((16,), 0.01, 0)
    real = Worker(model, real_sync, prof, state, bucket_bytes, overlap, TimeDilation(1.0))
    emu = EmulatedWorker(emu_sync, prof, state, 16, bucket_bytes, overlap, TimeDilation(1.0))
    for t in range(2):
        real.step(t, data.take(16 * t, state.sizes))
        emu.step(t)
    real.close()
    assert len(real.plan.buckets) >= 3
    assert emu_sync.calls == real_sync.calls          # same indices, sizes (elements) and float32, same order
    assert all(dtype == "float32" for _, _, dtype in emu_sync.calls)
    assert sum(n for _, n, _ in emu_sync.calls[:len(real.plan.buckets)]) == sum(prof.numels)
    assert isinstance(emu.buckets.flats[0], np.ndarray) and isinstance(real.buckets.flats[0], torch.Tensor)


def test_emulated_model_averaging_exchanges_a_model_sized_buffer():
    from hpcbench.train.emulated import EmulatedWorker

    prof = ComputeProfile(1e-4, 2e-4, 1e-5, np.array([2e-4, 0.0]), (300, 700))
    sync = RecordingSync("models")
    rec = EmulatedWorker(sync, prof, BatchState((8,), 0.1, 0), 8, 4 * 100, True, TimeDilation(1.0)).step(3)
    assert sync.calls == [(3, 1000, "float32")]
    assert rec.step_s >= prof.compute_s and rec.comm_span_s >= 0.0


class _VirtualTime:
    """Stands for the ``time`` module of :mod:`hpcbench.runtime.dilation`: sleeping advances the clock exactly."""

    def __init__(self) -> None:
        self.now = 0.0

    def perf_counter(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds


@pytest.fixture
def virtual_time(monkeypatch):
    """Emulated compute on a virtual clock: the recorded times are the slept ones, whatever the machine's load."""
    import hpcbench.runtime.dilation as dilation

    clock = _VirtualTime()
    monkeypatch.setattr(dilation, "time", clock)
    return clock


def test_dilation_sleeps_the_factor_times_longer_and_reads_modelled_seconds(virtual_time):
    d = TimeDilation(3.0)
    t0, raw0 = d.now(), virtual_time.now
    d.sleep(0.02)
    assert virtual_time.now - raw0 == pytest.approx(0.06)      # 3x dilated on the machine's clock
    assert d.now() - t0 == pytest.approx(0.02)                  # 20 ms on the run's (modelled) clock


def test_emulated_model_averaging_sleeps_the_copy_and_the_mix_of_the_model(virtual_time):
    """The real worker copies the model into its send buffer before the exchange starts and mixes the result in
    after it: the emulated one sleeps the profiled passes there (copy_s, then the synchroniser's mix_memory_s).
    On a virtual clock, so the recorded times are exactly the slept ones (no bound on a loaded machine's clock)."""
    from hpcbench.train.emulated import EmulatedWorker

    prof = ComputeProfile(1e-3, 2e-3, 1e-3, np.array([2e-3, 0.0]), (300, 700), copy_s=0.03, axpy_s=0.02)
    rec = EmulatedWorker(RecordingSync("models"), prof, BatchState((8,), 0.1, 0), 8, 4 * 100, True,
                         TimeDilation(1.0)).step(0)
    want = prof.compute_s + 0.03 + 2 * 0.02
    assert rec.compute_s == pytest.approx(want)       # each pass slept once: a second copy or mix adds 30 ms
    assert rec.forward_s >= 0.03 + prof.forward_s       # the copy comes before the forward
    assert rec.optimizer_s >= 0.04 + prof.optimizer_s   # the mix before the optimizer step
    assert rec.comm_span_s >= 0.03                      # counted from the step's start, as the real worker does
    # another device's compute time scales its memory passes alike; another batch keeps them
    fast = prof.scaled_to(prof.compute_s / 10)
    assert (fast.copy_s, fast.axpy_s) == pytest.approx((0.003, 0.002))
    assert prof.at_batch(2.0).copy_s == 0.03


def test_emulated_compute_follows_the_batch_size_the_context_holds():
    """Forward and backward in proportion to the batch, the optimizer unchanged (ComputeProfile.at_batch)."""
    from hpcbench.train.emulated import EmulatedWorker

    prof = ComputeProfile(0.01, 0.02, 0.004, np.array([0.02, 0.0]), (300, 700))
    assert prof.at_batch(1.0) is prof
    half = prof.at_batch(0.5)
    assert (half.forward_s, half.backward_s, half.optimizer_s) == (0.005, 0.01, 0.004)
    np.testing.assert_array_equal(half.param_ready_s, [0.01, 0.0])
    state = BatchState((8,), 0.1, 0)
    worker = EmulatedWorker(RecordingSync("models"), prof, state, 8, 4 * 100, True, TimeDilation(1.0))
    assert worker.step(0).compute_s >= prof.compute_s
    state.sizes = (4,)
    worker.step(1)
    assert worker.profile.compute_s == pytest.approx(0.019)


def test_an_emulated_rank_never_imports_torch():
    """What a non-zero rank of an emulated ResNet-50 job runs (config, registries, ring over MPI, the
    emulated worker and its step), in a fresh process: torch stays out (its ~150 MB per process)."""
    code = textwrap.dedent("""
        import sys
        import numpy as np
        from mpi4py import MPI
        from hpcbench.runtime.dilation import TimeDilation
        from hpcbench.sync import build
        from hpcbench.train.context import BatchState
        from hpcbench.train.config import load_config
        from hpcbench.train.emulated import EmulatedWorker
        from hpcbench.train.loop import TrainLoop
        from hpcbench.train.profile import ComputeProfile
        cfg = load_config(None, {"model": "resnet50", "compute": "emulated", "sync": "[ring, sma]"})
        prof = ComputeProfile(1e-4, 2e-4, 1e-5, np.array([2e-4, 1e-4, 0.0]), (3000, 2000, 1000))
        for section in cfg.sync:
            w = EmulatedWorker(build(section, MPI.COMM_WORLD), prof, BatchState((8,), 0.1, 0), 8, 4 * 2000, True,
                               TimeDilation(1.0))
            w.step(0)
        assert "torch" not in sys.modules, sorted(m for m in sys.modules if m.startswith("torch"))[:3]
        print("no torch")
    """)
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "no torch" in proc.stdout


def test_every_emulating_synchroniser_reduces_a_numpy_bucket():
    """Emulated ranks hand synchronisers numpy float32 buckets: at world size 1 each leaves them as they are."""
    from mpi4py import MPI

    from hpcbench.sync import Unavailable, build, get, names

    for name in names():
        cls = get(name)
        if not cls.emulates:
            continue
        try:
            sync = build(name, MPI.COMM_SELF)
        except Unavailable:
            continue
        flat = np.arange(1000, dtype=np.float32)
        sync.wait(sync.start(flat, 0))
        assert isinstance(flat, np.ndarray) and flat.dtype == np.float32, name
        np.testing.assert_array_equal(flat, np.arange(1000, dtype=np.float32), err_msg=name)
        sync.close()

"""Checkpoint and ``--resume`` of the federated emulation (issue 11): killed and resumed equals uninterrupted."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import h5py
import numpy as np
import pytest
import torch

from hpcbench.fl.checkpoint import FORMAT, config_differences, load_checkpoint, save_checkpoint
from hpcbench.results import read_attrs, read_table
from hpcbench.runtime.errors import InputError
from mpitools import ROOT, mpiexec_path, run_mpi, wait_unlocked
from test_fl_job import _kill_job

CONFIG = "jobs/configs/digits.yaml"
#: Oort (pacer active), FedYogi, a decaying learning rate and top-k uplink with error feedback: every piece
#: of state a checkpoint holds is exercised; every client online, so Oort chooses among all 1,000 from round 1
SYNC = ["--traces.availability.format", "none", "--rounds", "6", "--eval_interval", "3", "--progress", "false", "--selection", "oort",
        "--selection.pacer_step", "2", "--aggregator", "fedyogi", "--aggregator.eta", "0.01", "--decay_factor",
        "0.9", "--decay_round", "2", "--uplink_compression.name", "topk", "--checkpoint_interval", "2",
        "--target_accuracy", "0.1"]  # reached at round 3, before the checkpoint: the summary is restored
ASYNC = ["--traces.availability.format", "none", "--mode", "async", "--rounds", "6", "--eval_interval", "3", "--progress", "false", "--selection", "oort",
         "--aggregator", "fedyogi", "--aggregator.eta", "0.01", "--uplink_compression.name", "topk",
         "--checkpoint_interval", "2"]
#: rank 0 leaves with os._exit at the start of step 6: the checkpoint is from step 4 and step 5's rows,
#: written after it, must be dropped by the resume
KILL = ["--fault-inject", "0:6:exit"]
#: columns that measure the machine, not the emulation
WALL = ("wall_time_s", "round_wall_s", "train_wall_s", "train_cpu_s")


def _fl(n: int, args: list[str], out):
    return run_mpi(n, ["-m", "hpcbench.fl", CONFIG, *args, "--output", str(out)], timeout=240)


def _ok(proc):
    assert proc.returncode == 0, f"rc={proc.returncode}\nstdout:\n{proc.stdout[-3000:]}\nstderr:\n{proc.stderr[-3000:]}"


def _kill_and_resume(n: int, args: list[str], tmp_path):
    """Run uninterrupted and killed-then-resumed at ``-n n``; return both result files."""
    full, cut = tmp_path / "full.h5", tmp_path / "cut.h5"
    _ok(_fl(n, args, full))
    killed = _fl(n, args + KILL, cut)
    assert killed.returncode != 0, killed.stdout
    with h5py.File(cut, "r", locking=False) as h5:  # the lock of a rank just killed may linger a moment
        assert h5.attrs["status"] == "running"
    assert (tmp_path / "cut.h5.ckpt").is_file()
    assert not [p for p in os.listdir(tmp_path) if p.endswith(".tmp")]
    _ok(_fl(n, args + ["--resume", str(tmp_path / "cut.h5.ckpt")], cut))
    return full, cut


def _assert_same_run(full, cut, tables, step=4):
    a, b = read_attrs(full), read_attrs(cut)
    assert b["status"] == "completed" and b["resumed_from_step"] == step
    assert b["final_parameters_sha256"] == a["final_parameters_sha256"]
    with h5py.File(full, "r") as fa, h5py.File(cut, "r") as fb:
        assert fb["model/final_parameters"][()].tobytes() == fa["model/final_parameters"][()].tobytes()
    for name in ("time_to_accuracy_s", "rounds_to_accuracy", "final_test_accuracy", "rounds_completed"):
        assert np.array_equal(a[name], b[name], equal_nan=True), name
    assert ("wall_to_accuracy_s" in a) == ("wall_to_accuracy_s" in b)
    for table in tables:
        ta, tb = read_table(full, table), read_table(cut, table)
        assert set(ta) == set(tb)
        for col in ta:
            if col in WALL:
                continue
            x, y = np.asarray(ta[col]), np.asarray(tb[col])
            assert x.shape == y.shape, (table, col, x.shape, y.shape)
            assert np.array_equal(x, y, equal_nan=x.dtype.kind == "f"), (table, col)
    assert len(read_table(cut, "ranks")["rank"]) == len(read_table(full, "ranks")["rank"])


@pytest.mark.mpi
@pytest.mark.parametrize("n", [1, 4])
def test_sync_killed_and_resumed_is_bit_identical(n, tmp_path):
    """Oort + FedYogi + top-k with EF, killed by os._exit after the step-4 checkpoint: same bits as uninterrupted."""
    full, cut = _kill_and_resume(n, SYNC, tmp_path)
    _assert_same_run(full, cut, ("rounds", "clients"))
    assert read_attrs(cut)["rounds_to_accuracy"] == 3
    np.testing.assert_array_equal(read_table(cut, "rounds")["round"], np.arange(1, 7))


@pytest.mark.mpi
@pytest.mark.skipif(not os.path.isdir("/proc"), reason="needs /proc to find the job's processes")
def test_async_sigkilled_and_resumed_is_bit_identical(tmp_path):
    """FedBuff at -n 2, the whole job SIGKILLed (kill -9 of mpiexec's process group) once a checkpoint exists."""
    args = [a if a != "6" else "30" for a in ASYNC]  # 30 server updates: the kill lands mid-run
    full, cut, ckpt = tmp_path / "full.h5", tmp_path / "cut.h5", tmp_path / "cut.h5.ckpt"
    _ok(_fl(2, args, full))
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONUNBUFFERED="1")
    cmd = [mpiexec_path(), "-n", "2", sys.executable, "-m", "hpcbench.fl", CONFIG, *args, "--output", str(cut)]
    proc = subprocess.Popen(cmd, cwd=str(ROOT), env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, start_new_session=True)
    deadline = time.time() + 120
    while not ckpt.exists() and proc.poll() is None and time.time() < deadline:
        time.sleep(0.01)
    _kill_job(proc)  # SIGKILL to the process group and to every process below mpiexec
    assert proc.returncode == -signal.SIGKILL, "the job ended before it could be killed"
    step = int(load_checkpoint(ckpt)["step"])
    wait_unlocked(cut, timeout=60)   # the kernel drops a killed writer's lock a moment after it is gone (hang guard)
    with h5py.File(cut, "r") as h5:
        assert h5.attrs["status"] == "running"
    assert 2 <= step < 30
    _ok(_fl(2, args + ["--resume", str(ckpt)], cut))
    _assert_same_run(full, cut, ("rounds", "tasks"), step)


# ---------------------------------------------------------------------------- bad resumes: exit 2
def _run_inprocess(argv):
    from hpcbench.fl.job import FLJob
    from hpcbench.lifecycle import run

    return run(FLJob, [CONFIG, "--progress", "false", *argv])


@pytest.fixture
def checkpoint(tmp_path):
    """A real checkpoint from a 2-round run (in-process, size 1)."""
    out = tmp_path / "run.h5"
    assert _run_inprocess(["--rounds", "2", "--checkpoint_interval", "2", "--output", str(out)]) == 0
    return out, tmp_path / "run.h5.ckpt"


def test_resume_with_changed_config_exits_2_naming_keys(checkpoint, capsys):
    out, ckpt = checkpoint
    capsys.readouterr()
    assert _run_inprocess(["--rounds", "3", "--learning_rate", "0.2", "--aggregator", "fedyogi",
                           "--resume", str(ckpt)]) == 2
    err = capsys.readouterr().err
    assert "learning_rate" in err and "aggregator.name" in err and "rounds" not in err.split("only")[0]
    assert read_attrs(out)["status"] == "completed"  # the results file was not touched


def test_resume_continues_with_more_rounds(checkpoint):
    """rounds may grow on resume: the file gets the new rounds appended."""
    out, ckpt = checkpoint
    assert _run_inprocess(["--rounds", "3", "--resume", str(ckpt)]) == 0
    np.testing.assert_array_equal(read_table(out, "rounds")["round"], [1, 2, 3])
    assert read_attrs(out)["status"] == "completed"


@pytest.mark.parametrize("content", [None, b"", b"not a checkpoint", "pickle"])
def test_missing_or_corrupt_checkpoint_exits_2(tmp_path, content, capsys):
    ckpt = tmp_path / "bad.ckpt"
    if content == "pickle":  # arbitrary objects are refused, never unpickled
        torch.save({"format": FORMAT, "payload": _Arbitrary()}, ckpt)
    elif content is not None:
        ckpt.write_bytes(content)
    assert _run_inprocess(["--rounds", "2", "--resume", str(ckpt), "--output", str(tmp_path / "o.h5")]) == 2
    assert "--resume" in capsys.readouterr().err
    assert not (tmp_path / "o.h5").exists()


class _Arbitrary:
    pass


def test_truncated_checkpoint_is_refused(checkpoint):
    _, ckpt = checkpoint
    data = ckpt.read_bytes()
    ckpt.write_bytes(data[: len(data) // 2])
    with pytest.raises(InputError, match="truncated"):
        load_checkpoint(ckpt)


@pytest.mark.parametrize("argv, key", [(["--checkpoint_interval", "-1"], "checkpoint_interval"),
                                       (["--checkpoint", "{nope}.ckpt"], "checkpoint")])
def test_bad_checkpoint_keys_exit_2(tmp_path, argv, key, capsys):
    assert _run_inprocess([*argv, "--output", str(tmp_path / "o.h5")]) == 2
    assert key in capsys.readouterr().err
    assert not (tmp_path / "o.h5").exists()


# ----------------------------------------------------------------------------------- atomic write
def test_crash_mid_write_leaves_previous_checkpoint(tmp_path, monkeypatch):
    path = tmp_path / "c.ckpt"
    save_checkpoint(path, {"step": 2, "params": np.arange(5, dtype=np.float32)})

    def dies_half_way(obj, fh, *args, **kwargs):
        fh.write(b"PK\x03\x04 partial")
        raise OSError("disk full")

    monkeypatch.setattr(torch, "save", dies_half_way)
    with pytest.raises(OSError, match="disk full"):
        save_checkpoint(path, {"step": 4, "params": np.zeros(5, np.float32)})
    monkeypatch.undo()
    state = load_checkpoint(path, schema=False)
    assert state["step"] == 2 and state["params"].dtype == np.float32
    np.testing.assert_array_equal(state["params"], np.arange(5))
    assert os.listdir(tmp_path) == ["c.ckpt"]


def test_round_trip_keeps_dtypes_and_nesting(tmp_path):
    state = {"a": np.array([1, 2], np.int64), "b": {3: {"w": np.ones((2, 2), np.float64)}}, "c": [1.5, None, "x"],
             "d": np.bool_(True), "e": np.zeros(3, bool)}
    got = load_checkpoint(save_checkpoint(tmp_path / "s.ckpt", state), schema=False)
    assert got["a"].dtype == np.int64 and got["b"][3]["w"].dtype == np.float64 and got["e"].dtype == bool
    assert got["c"] == [1.5, None, "x"] and got["d"] is True


def test_config_differences_names_nested_keys_but_not_run_time_ones():
    import json

    saved = {"seed": 1, "rounds": 5, "progress": True, "aggregator": {"name": "fedyogi", "eta": 0.01}}
    now = {"seed": 1, "rounds": 9, "progress": False, "aggregator": {"name": "fedyogi", "eta": 0.02}}
    assert config_differences(json.dumps(saved), now) == ["aggregator.eta"]
    assert config_differences(json.dumps(saved), {**saved, "seed": 2, "extra": 1}) == ["extra", "seed"]


# ------------------------------------------------------------------- codec state through a checkpoint
@pytest.mark.parametrize("name", ["qsgd", "topk"])
def test_codec_state_continues_bit_for_bit_after_a_checkpoint(name, tmp_path):
    """Residuals, step counters and the stochastic rounding generator (qsgd) survive save/load exactly."""
    from hpcbench.fl.config import load_config
    from hpcbench.fl.uplink import UpdateCodec, model_tensors

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(16, 8), torch.nn.ReLU(), torch.nn.Linear(8, 4))
    section = load_config(None, {"uplink_compression.name": name}).uplink_compression
    tensors = model_tensors(model)
    p = sum(t.numel() for t in model.parameters())
    rng = np.random.default_rng(3)
    updates = [rng.standard_normal(p).astype(np.float32) for _ in range(6)]
    first = UpdateCodec(section, tensors, 1)
    for i, d in enumerate(updates[:3]):
        first.encode(d, client_id=i % 2)
    state = load_checkpoint(save_checkpoint(tmp_path / "c.ckpt", {"uplink": first.state_dict()}),
                            schema=False)["uplink"]
    if name == "qsgd":
        assert state["generators"], "qsgd's rounding generator is saved"
    second = UpdateCodec(section, tensors, 1)
    second.load_state_dict(state)
    for i, d in enumerate(updates[3:]):
        a, _ = first.encode(d, client_id=i % 2)
        b, _ = second.encode(d, client_id=i % 2)
        assert a.tobytes() == b.tobytes()


# ----------------------------------------------------------------------- results file reopened for append
def test_reopen_truncates_and_refuses_another_kind(tmp_path):
    from hpcbench.results import Column, ResultsFile

    cols = [Column("round", "int64", "1"), Column("x", "float64", "s")]
    path = tmp_path / "r.h5"
    rf = ResultsFile(path, "fl", {"rounds": 3})
    rf.table("rounds", cols).append({"round": [1, 2, 3], "x": [0.5, 1.5, 2.5]})
    rf._h5.close()  # as a killed run leaves it: status running, its lock dropped by the kernel
    rf.release_lock()
    again = ResultsFile.reopen(path, "fl", {"rounds": 4}, {"resumed_at": "now"})
    table = again.table("rounds", cols)
    assert table.rows == 3
    table.truncate(2)
    table.append({"round": [3, 4], "x": [9.0, 9.5]})
    with pytest.raises(ValueError, match="columns"):
        again.table("rounds", cols[:1])
    again.close("completed")
    np.testing.assert_array_equal(read_table(path, "rounds")["x"], [0.5, 1.5, 9.0, 9.5])
    attrs = read_attrs(path)
    assert attrs["status"] == "completed" and attrs["resumed_at"] == "now" and attrs["config"]["rounds"] == 4
    with pytest.raises(ValueError, match="not a 'train' results file"):
        ResultsFile.reopen(path, "train", {})

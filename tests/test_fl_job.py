"""End-to-end tests of ``python -m hpcbench.fl`` launched under ``mpiexec``."""

from __future__ import annotations

import json
import math
import os
import re
import signal
import subprocess
import sys
import time
from datetime import datetime

import h5py
import numpy as np
import pytest

from hpcbench.results import read_attrs, read_table
from mpitools import ROOT, mpiexec_path, run_mpi

pytestmark = pytest.mark.mpi

CONFIG = "jobs/configs/digits.yaml"
SMALL = ["--rounds", "6", "--eval_interval", "3", "--progress", "false"]
TABLES = ("rounds", "clients", "ranks")

_runs: dict[int, tuple] = {}


def _small_job(n: int, tmp_path_factory):
    """Run the small digits job once per world size (cached for the module)."""
    if n not in _runs:
        out = tmp_path_factory.mktemp(f"np{n}") / "fl.h5"
        proc = run_mpi(n, ["-m", "hpcbench.fl", CONFIG, *SMALL, "--output", str(out)], timeout=240)
        _runs[n] = (proc, out)
    return _runs[n]


def _assert_ok(proc):
    assert proc.returncode == 0, f"rc={proc.returncode}\nstdout:\n{proc.stdout[-3000:]}\nstderr:\n{proc.stderr[-3000:]}"


@pytest.mark.parametrize("n", [1, 2, 4])
def test_small_job_output(n, tmp_path_factory):
    proc, out = _small_job(n, tmp_path_factory)
    _assert_ok(proc)
    attrs = read_attrs(out)
    assert attrs["status"] == "completed"
    assert attrs["kind"] == "fl"
    assert attrs["hpcbench_version"]
    assert "git_commit" in attrs
    assert attrs["mpi_library_version"]
    assert attrs["world_size"] == n
    assert len(attrs["hostnames"].split(",")) == n
    for key in ("start_time", "end_time"):
        datetime.fromisoformat(attrs[key])
    assert attrs["end_time"] >= attrs["start_time"]
    assert attrs["seed"] == 1
    assert "slurm_job_id" in attrs
    assert attrs["rounds_completed"] == 6
    assert attrs["config"]["rounds"] == 6

    with h5py.File(out, "r") as h5:
        for name in TABLES:
            group = h5[name]
            cols = json.loads(group.attrs["columns"])
            assert sorted(cols) == sorted(group.keys())
            for col in cols:
                assert len(group[col]) == group.attrs["rows"], (name, col)
        missing_units = []
        h5.visititems(lambda path, obj: missing_units.append(path)
                      if isinstance(obj, h5py.Dataset) and "units" not in obj.attrs else None)
        assert not missing_units, missing_units
        assert h5["model/final_parameters"].dtype == np.float32
        assert h5["model/final_parameters"].shape == (attrs["num_parameters"],)

    rounds = read_table(out, "rounds")
    assert np.array_equal(rounds["round"], np.arange(1, 7))
    evaluated = np.isfinite(rounds["test_accuracy"])
    assert np.array_equal(evaluated, rounds["round"] % 3 == 0)
    assert np.all(np.diff(rounds["virtual_time_s"]) > 0)
    assert np.all(rounds["participants"] <= 10)
    assert np.array_equal(rounds["stragglers"] + rounds["dropouts"], rounds["selected"] - rounds["participants"])
    full = (rounds["online"] >= 13) & (rounds["dropouts"] <= 3)  # ceil(10 * 1.3) - 10 spare clients
    assert np.all(rounds["participants"][full] == 10)
    assert np.all(rounds["stragglers"][full] == 3 - rounds["dropouts"][full])
    assert rounds["dropouts"].sum() > 0  # the FLASH trace has clients leaving mid-round

    clients = read_table(out, "clients")
    per_round = np.bincount(clients["round"], minlength=7)[1:]
    assert np.array_equal(per_round, rounds["selected"])
    strag = clients["status"] == "straggler"
    drop = clients["status"] == "dropped"
    assert strag.sum() == rounds["stragglers"].sum() > 0
    assert drop.sum() == rounds["dropouts"].sum()
    assert np.all(clients["executor_rank"][strag | drop] == -1)
    assert np.all(np.isnan(clients["train_loss"][strag | drop]))
    assert np.all(clients["uplink_bytes"][strag | drop] == 0)
    assert np.all(clients["uplink_bytes"][~(strag | drop)] == attrs["model_bytes"])
    assert np.all(clients["downlink_bytes"] == attrs["model_bytes"])
    agg = ~(strag | drop)
    assert set(clients["status"][agg]) == {"aggregated"}
    expected_ranks = {0} if n == 1 else set(range(1, n))
    assert set(clients["executor_rank"][agg].tolist()) <= expected_ranks
    for r in range(1, 7):  # stragglers finish no earlier than any aggregated client
        sel = clients["round"] == r
        if not (sel & strag).any():
            continue
        assert clients["completion_s"][sel & agg].max() <= clients["completion_s"][sel & strag].min()

    ranks = read_table(out, "ranks")
    assert np.array_equal(ranks["rank"], np.arange(n))
    assert ranks["clients_trained"].sum() == agg.sum()


def test_results_equal_across_world_sizes(tmp_path_factory):
    runs = {n: _small_job(n, tmp_path_factory) for n in (1, 2, 4)}
    for proc, _ in runs.values():
        _assert_ok(proc)
    params = {}
    tables = {}
    for n, (_, out) in runs.items():
        with h5py.File(out, "r") as h5:
            params[n] = h5["model/final_parameters"][()]
        tables[n] = read_table(out, "rounds")
    for n in (2, 4):
        assert params[n].tobytes() == params[1].tobytes(), f"final parameters differ at -n {n}"
        for col in ("test_accuracy", "virtual_time_s", "train_loss", "stragglers"):
            assert np.array_equal(tables[n][col], tables[1][col], equal_nan=True), (n, col)
        c1, cn = read_table(runs[1][1], "clients"), read_table(runs[n][1], "clients")
        for col in ("client_id", "status", "completion_s", "train_loss"):
            assert np.array_equal(cn[col], c1[col], equal_nan=col == "train_loss"), (n, col)


STRATEGIES = ["--selection", "oort", "--selection.pacer_step", "2", "--aggregator", "fedyogi",
              "--aggregator.eta", "0.01", "--decay_factor", "0.9", "--decay_round", "2"]


def test_oort_fedyogi_equal_across_world_sizes(tmp_path):
    """Oort (fed back every round, pacer active) with FedYogi and a decaying rate: same bits at -np 1, 2, 4."""
    outs = {}
    for n in (1, 2, 4):
        outs[n] = tmp_path / f"np{n}.h5"
        proc = run_mpi(n, ["-m", "hpcbench.fl", CONFIG, *SMALL, *STRATEGIES, "--output", str(outs[n])],
                       timeout=240)
        _assert_ok(proc)
    with h5py.File(outs[1], "r") as h5:
        base = h5["model/final_parameters"][()]
    c1, r1 = read_table(outs[1], "clients"), read_table(outs[1], "rounds")
    assert np.all(np.isfinite(c1["utility"][c1["status"] == "aggregated"]))
    np.testing.assert_allclose(r1["learning_rate"], 0.1 * 0.9 ** ((np.arange(1, 7) - 1) // 2))
    assert read_attrs(outs[1])["config"]["selection"]["name"] == "oort"
    for n in (2, 4):
        with h5py.File(outs[n], "r") as h5:
            assert h5["model/final_parameters"][()].tobytes() == base.tobytes(), f"final parameters differ at -n {n}"
        cn = read_table(outs[n], "clients")
        for col in ("client_id", "status", "utility", "train_loss"):
            assert np.array_equal(cn[col], c1[col], equal_nan=col != "status"), (n, col)


@pytest.mark.parametrize("concurrency", ["1", "all"])
def test_executor_concurrency_changes_who_trains_not_results(concurrency, tmp_path, tmp_path_factory):
    """-np 4 with one executor per round (rotating) or every executor: same bits as -np 1."""
    _, base = _small_job(1, tmp_path_factory)
    out = tmp_path / "fl.h5"
    proc = run_mpi(4, ["-m", "hpcbench.fl", CONFIG, *SMALL, "--executor_concurrency", concurrency,
                       "--output", str(out)], timeout=240)
    _assert_ok(proc)
    with h5py.File(out, "r") as h5, h5py.File(base, "r") as h0:
        assert h5["model/final_parameters"][()].tobytes() == h0["model/final_parameters"][()].tobytes()
    clients = read_table(out, "clients")
    trained = clients["executor_rank"][clients["executor_rank"] >= 0]
    per_round = [np.unique(trained[clients["round"][clients["executor_rank"] >= 0] == r]) for r in range(1, 7)]
    if concurrency == "1":  # one node here: one executor per round, in rotation 1, 2, 3, 1, ...
        assert [list(r) for r in per_round] == [[1], [2], [3], [1], [2], [3]]
    else:
        assert all(len(r) == 3 for r in per_round)
    ranks = read_table(out, "ranks")
    assert ranks["clients_trained"][0] == 0 and (ranks["clients_trained"][1:] > 0).all()


# ------------------------------------------------------------- FedBuff, compressed updates
ASYNC = ["--mode", "async", "--uplink_compression.name", "topk", "--uplink_compression.ratio", "0.01",
         "--downlink_compression.name", "fp16", "--selection", "oort"]
_async_runs: dict[int, tuple] = {}


def _async_job(n: int, tmp_path_factory):
    """The small job in FedBuff mode with Oort, top-k 1 % uplink (EF) and fp16 downlink, once per size."""
    if n not in _async_runs:
        out = tmp_path_factory.mktemp(f"async{n}") / "fl.h5"
        proc = run_mpi(n, ["-m", "hpcbench.fl", CONFIG, *SMALL, *ASYNC, "--output", str(out)], timeout=240)
        _async_runs[n] = (proc, out)
    return _async_runs[n]


def test_async_same_bits_at_any_world_size(tmp_path_factory):
    runs = {n: _async_job(n, tmp_path_factory) for n in (1, 2, 4)}
    for proc, _ in runs.values():
        _assert_ok(proc)
    attrs = read_attrs(runs[1][1])
    assert attrs["rounds_completed"] == 6 and attrs["config"]["mode"] == "async"
    rounds = read_table(runs[1][1], "rounds")
    assert np.array_equal(rounds["round"], np.arange(1, 7))
    assert np.array_equal(np.isfinite(rounds["test_accuracy"]), rounds["round"] % 3 == 0)
    assert np.all(np.diff(rounds["virtual_time_s"]) > 0)
    assert np.all(rounds["buffered"] == 10) and np.all(rounds["in_flight"] <= 13)
    assert rounds["mean_staleness"].max() > 0
    tasks = read_table(runs[1][1], "tasks")
    agg = tasks["status"] == "aggregated"
    assert agg.sum() == 60 and np.array_equal(np.bincount(tasks["applied_in"][agg])[1:], np.full(6, 10))
    assert np.all(tasks["staleness"][agg] <= 5)
    assert np.all(tasks["uplink_bytes"][agg] < attrs["model_bytes"] / 10)  # top-k 1 %: index + value each
    assert np.all(tasks["uplink_bytes"][~agg] == 0)
    assert np.all(tasks["downlink_bytes"] == attrs["model_bytes"] // 2)  # fp16
    assert attrs["config"]["selection"]["name"] == "oort"  # fed back each finished task (utility below)
    assert np.all(np.isfinite(tasks["utility"][agg])) and np.all(np.isnan(tasks["utility"][~agg]))
    # no client in flight twice: a client's tasks never overlap in virtual time
    for cid in np.unique(tasks["client_id"]):
        mine = tasks["client_id"] == cid
        order = np.argsort(tasks["start_s"][mine])
        assert np.all(tasks["finish_s"][mine][order][:-1] <= tasks["start_s"][mine][order][1:])
    with h5py.File(runs[1][1], "r") as h0:
        base = h0["model/final_parameters"][()]
    for n in (2, 4):
        with h5py.File(runs[n][1], "r") as h5:
            assert h5["model/final_parameters"][()].tobytes() == base.tobytes(), f"-n {n}"
        other = read_table(runs[n][1], "rounds")
        for col in ("test_accuracy", "virtual_time_s", "train_loss", "mean_staleness", "dropouts"):
            assert np.array_equal(other[col], rounds[col], equal_nan=True), (n, col)
        other_tasks = read_table(runs[n][1], "tasks")
        for col in ("client_id", "status", "utility"):
            assert np.array_equal(other_tasks[col], tasks[col], equal_nan=col == "utility"), (n, col)
        assert set(read_table(runs[n][1], "tasks")["executor_rank"][agg].tolist()) <= set(range(1, n))


def test_topk_uplink_charges_fewer_bytes(tmp_path, tmp_path_factory):
    """Same selection in round 1 (it does not depend on bytes); every upload is cheaper."""
    proc0, base = _small_job(2, tmp_path_factory)
    _assert_ok(proc0)
    out = tmp_path / "topk.h5"
    proc = run_mpi(1, ["-m", "hpcbench.fl", CONFIG, *SMALL, "--uplink_compression.name", "topk",
                       "--uplink_compression.ratio", "0.01", "--output", str(out)], timeout=240)
    _assert_ok(proc)
    c0, c1 = read_table(base, "clients"), read_table(out, "clients")
    r0, r1 = c0["round"] == 1, c1["round"] == 1
    assert np.array_equal(c0["client_id"][r0], c1["client_id"][r1])
    assert np.all(c1["communication_s"][r1] < c0["communication_s"][r1])
    np.testing.assert_array_equal(c1["compute_s"][r1], c0["compute_s"][r1])
    sent = c1["status"] == "aggregated"
    model_bytes = read_attrs(out)["model_bytes"]
    assert np.all(c1["uplink_bytes"][sent] < model_bytes / 10)
    assert np.all(c1["downlink_bytes"] == model_bytes)


def test_stop_at_target_ends_every_rank(tmp_path):
    """Stopping early reaches executors waiting for a later round (their receive is cancelled)."""
    out = tmp_path / "fl.h5"
    proc = run_mpi(4, ["-m", "hpcbench.fl", CONFIG, "--rounds", "60", "--eval_interval", "1",
                       "--target_accuracy", "0.5", "--stop_at_target", "true", "--executor_concurrency", "1",
                       "--progress", "false", "--output", str(out)], timeout=240)
    _assert_ok(proc)
    rounds = read_table(out, "rounds")
    attrs = read_attrs(out)
    assert attrs["status"] == "completed"
    assert 1 <= attrs["rounds_to_accuracy"] < 60
    assert len(rounds["round"]) == attrs["rounds_to_accuracy"]
    assert rounds["test_accuracy"][-1] >= 0.5


# --------------------------------------------------------------------------------- bad input
def _yaml(tmp_path, text):
    p = tmp_path / "job.yaml"
    p.write_text(text)
    return [str(p)]


def _bad_trace(tmp_path):
    p = tmp_path / "bad.json"
    p.write_text('[{"Phone Model": "x", "ResNet Latency": 1.0,')  # truncated JSON
    return [CONFIG, "--traces.device.path", str(p)]


BAD_INPUTS = {
    "yaml-unknown-key": (lambda t: _yaml(t, "rounds: 3\nbogus_key: 17\n"), ["bogus_key", "17"]),
    "yaml-wrong-type": (lambda t: _yaml(t, "rounds: six\n"), ["rounds", "six"]),
    "yaml-out-of-range": (lambda t: _yaml(t, "dataset:\n  alpha: -0.5\n"), ["dataset.alpha", "-0.5"]),
    "flag-unknown-key": (lambda t: [CONFIG, "--bogus_key", "17"], ["bogus_key"]),
    "flag-wrong-type": (lambda t: [CONFIG, "--rounds", "six"], ["rounds", "six"]),
    "flag-out-of-range": (lambda t: [CONFIG, "--participants", "0"], ["participants", "0"]),
    "missing-trace": (lambda t: [CONFIG, "--traces.device.path", "does/not/exist.json"],
                      ["traces.device", "does/not/exist.json"]),
    "malformed-trace": (_bad_trace, ["traces.device", "bad.json", "malformed JSON"]),
    "missing-config": (lambda t: ["does/not/exist.yaml"], ["does/not/exist.yaml"]),
    "bad-concurrency": (lambda t: [CONFIG, "--executor_concurrency", "0"], ["executor_concurrency", "0"]),
    "unknown-selector": (lambda t: [CONFIG, "--selection.name", "greedy"], ["selection", "greedy", "random, oort"]),
    "bad-oort-key": (lambda t: _yaml(t, "selection:\n  name: oort\n  pacer_step: -3\n"),
                     ["pacer_step", "-3"]),
    # new keys (every bad value of each is checked in-process in test_fl_async.py)
    "bad-uplink-compressor": (lambda t: [CONFIG, "--uplink_compression.name", "zip"],
                              ["uplink_compression", "zip"]),
}


@pytest.mark.parametrize("case", list(BAD_INPUTS))
def test_bad_input_exit_2_no_output(case, tmp_path):
    make_args, needles = BAD_INPUTS[case]
    outdir = tmp_path / "out"
    outdir.mkdir()      # a valid output, so that each case fails on its own input (the outputs are checked first)
    out = outdir / "fl.h5"
    proc = run_mpi(2, ["-m", "hpcbench.fl", *make_args(tmp_path), "--progress", "false", "--output", str(out)],
                   timeout=120)
    assert proc.returncode == 2, f"rc={proc.returncode}\nstderr:\n{proc.stderr[-3000:]}"
    for needle in needles:
        assert needle in proc.stderr, f"{needle!r} not in stderr:\n{proc.stderr[-3000:]}"
    assert "Traceback" not in proc.stderr
    assert not out.exists()
    assert not any(outdir.iterdir()), sorted(p.name for p in outdir.iterdir())


# --------------------------------------------------------------------------------- SIGKILL
def _descendants(pid: int) -> list[int]:
    """``pid`` and every process below it (hydra's proxy and the ranks run in their own sessions)."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as fh:
                ppid = int(fh.read().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        children.setdefault(ppid, []).append(int(entry))
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        todo += children.get(p, [])
    return out


def _kill_job(proc: subprocess.Popen) -> None:
    pids = _descendants(proc.pid)
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    for p in pids:
        try:
            os.kill(p, signal.SIGKILL)
        except ProcessLookupError:
            pass
    proc.wait(timeout=30)
    deadline = time.time() + 10
    while time.time() < deadline and any(_alive(p) for p in pids):
        time.sleep(0.1)


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


def test_sigkill_leaves_readable_rounds(tmp_path):
    out = tmp_path / "killed.h5"
    err_path = tmp_path / "stderr.txt"
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONUNBUFFERED="1")
    cmd = [mpiexec_path(), "-n", "2", sys.executable, "-m", "hpcbench.fl", CONFIG, "--rounds", "2000",
           "--eval_interval", "1", "--progress", "true", "--output", str(out)]
    with open(err_path, "w") as err:
        proc = subprocess.Popen(cmd, cwd=str(ROOT), env=env, stdin=subprocess.DEVNULL,
                                stdout=subprocess.DEVNULL, stderr=err, start_new_session=True)
    try:
        # h5py cannot open the file while the writer holds it, so follow the
        # progress bar (updated after each round's rows are appended and flushed)
        # and the file's growth.
        deadline = time.time() + 150
        done, size0 = 0, None
        while time.time() < deadline and proc.poll() is None:
            time.sleep(0.3)
            counts = re.findall(r"(\d+)/2000", err_path.read_text(errors="replace"))
            done = int(counts[-1]) if counts else 0
            size = out.stat().st_size if out.exists() else 0
            if size and size0 is None:
                size0 = size
            if done >= 4 and size0 is not None and size > size0:
                break
        assert proc.poll() is None, f"job ended early:\n{err_path.read_text()[-3000:]}"
        assert done >= 4, f"job did not reach 4 rounds:\n{err_path.read_text()[-3000:]}"
    finally:
        _kill_job(proc)

    with h5py.File(out, "r", locking=False) as h5:
        assert h5.attrs["status"] == "running"
        for name in ("rounds", "clients"):
            group = h5[name]
            rows = int(group.attrs["rows"])
            for col in json.loads(group.attrs["columns"]):
                assert len(group[col]) == rows, (name, col)
        rounds = read_table(h5, "rounds")
    n = len(rounds["round"])
    assert n >= 3
    assert np.array_equal(rounds["round"], np.arange(1, n + 1))
    # ... and `hpcbench results show` tells it from a live run: its writer is gone (docs/architecture.md,
    # "Data-safety guarantees")
    from hpcbench.results.status import file_status
    from hpcbench.results_command import main as results_main

    assert file_status(out).state == "interrupted"
    assert results_main(["show", str(out)]) == 0
    assert np.all(np.isfinite(rounds["test_accuracy"]))
    assert np.all(np.isfinite(rounds["virtual_time_s"]))


# ------------------------------------------------------------------------------ default job
def test_default_digits_job_reaches_target(tmp_path):
    out = tmp_path / "digits.h5"
    proc = run_mpi(2, ["-m", "hpcbench.fl", CONFIG, "--progress", "false", "--output", str(out)], timeout=300)
    _assert_ok(proc)
    attrs = read_attrs(out)
    assert attrs["status"] == "completed"
    assert attrs["rounds_completed"] == 100
    assert attrs["final_test_accuracy"] >= 0.90
    assert math.isfinite(attrs["time_to_accuracy_s"]) and attrs["time_to_accuracy_s"] > 0
    assert 1 <= attrs["rounds_to_accuracy"] <= 100
    rounds = read_table(out, "rounds")
    assert len(rounds["round"]) == 100
    assert rounds["test_accuracy"][-1] == attrs["final_test_accuracy"]

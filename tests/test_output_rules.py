"""The output rules and concurrent runs of docs/architecture.md ("Data-safety guarantees": **Side outputs**,
**Concurrent runs**, **Reading a live file**): issue 35 parts 1, 2 and 5.

Every file a run writes (results, checkpoint, Chrome trace, TensorBoard run
folder, ``results export -o``, ``reproduce --out``) is declared, checked
together before the run, locked for the run and written through a temporary
file; a file another live run holds is refused (exit 2) before anything is
truncated; ``results show`` reads a live file as of its writer's last
flush; a write error marks the run failed.
"""

from __future__ import annotations

import hashlib
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest

from hpcbench.results import Column, ResultsFile, read_attrs
from hpcbench.results.status import file_status
from hpcbench.results_command import main as results_main
from hpcbench.runtime.errors import InputError
from hpcbench.runtime.outputs import (Output, OutputLock, check_outputs, claim_outputs, in_use, lock_path,
                                      replace_atomically)
from mpitools import ROOT

CONFIG = str(ROOT / "jobs" / "configs" / "digits.yaml")
FAST = ["--rounds", "2", "--eval_interval", "1", "--progress", "false", "--traces.availability.format", "none"]
ENV = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""), OMP_NUM_THREADS="1")


def _fl(argv) -> int:
    from hpcbench.fl.job import FLJob
    from hpcbench.lifecycle import run

    return run(FLJob, [CONFIG, *FAST, *argv])


def _digest(path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def _listing(folder: Path) -> dict[str, str]:
    return {p.name: (_digest(p) if p.is_file() else "<dir>") for p in sorted(folder.iterdir())}


# ------------------------------------------------------------------------- part 1: one mechanism, checked first
def test_check_outputs_refuses_each_kind_of_bad_path(tmp_path):
    """Side outputs: a folder name, a directory, a FIFO, a symbolic link, an existing file, two outputs on one file,
    an output on an input: each refused naming its key, before anything exists."""
    (tmp_path / "d").mkdir()
    (tmp_path / "tb").mkdir()
    os.mkfifo(tmp_path / "fifo")
    (tmp_path / "old.h5").write_bytes(b"old")
    (tmp_path / "link").symlink_to(tmp_path / "old.h5")
    (tmp_path / "conf.yaml").write_text("rounds: 1\n")
    before = _listing(tmp_path)
    cases = [
        ([Output("output", f"{tmp_path}/d/")], "names a folder"),
        ([Output("output", f"{tmp_path}/new/")], "names a folder"),
        ([Output("output", tmp_path / "d")], "is a directory"),
        ([Output("chrome_trace", tmp_path / "fifo")], "not a regular file"),
        ([Output("output", tmp_path / "link")], "symbolic link"),
        ([Output("output", tmp_path / "old.h5")], "exists; pass --overwrite"),
        ([Output("output", tmp_path / "o.h5"), Output("chrome_trace", tmp_path / "o.h5")], "is the results file"),
        ([Output("output", tmp_path / "o.h5"), Output("chrome_trace", tmp_path / "t.json"),
          Output("checkpoint", tmp_path / "t.json")], "also chrome_trace's file"),
        ([Output("output", tmp_path / "tb" / "o.h5"), Output("--tensorboard", tmp_path / "tb", folder=True)],
         "lies in --tensorboard's folder"),
    ]
    for outputs, message in cases:
        with pytest.raises(InputError, match=message) as err:
            check_outputs(outputs, overwrite=False)
        assert str(err.value).startswith(outputs[-1].key if "also" in message or "results file" in message
                                         else outputs[0].key)
    with pytest.raises(InputError, match="is the input file of config"):
        check_outputs([Output("output", tmp_path / "conf.yaml")], overwrite=True,
                      inputs={"config": tmp_path / "conf.yaml"})
    assert _listing(tmp_path) == before


def _train(argv, n=1, timeout=300):
    from mpitools import run_mpi

    quick = ["jobs/configs/train-quick.yaml", "--warmup", "1", "--iterations", "2", "--batches_per_iter", "2",
             "--progress", "false", "--model", "digits_mlp", "--batch_size", "4", "--sync", "[ring]"]
    return run_mpi(n, ["-m", "hpcbench.train", *quick, *argv], timeout=timeout)


@pytest.mark.mpi
def test_train_trace_on_the_results_file_existing_or_fifo_is_refused(tmp_path):
    """Side outputs: the Chrome trace is checked with the results file before the run (was: the results replaced by
    the trace, exit 0; an existing trace or a FIFO replaced without --overwrite)."""
    out = tmp_path / "o.h5"
    proc = _train(["--chrome_trace", str(out), "--output", str(out)])
    assert proc.returncode == 2, proc.stderr
    assert "chrome_trace" in proc.stderr and "is the results file itself" in proc.stderr
    assert "Traceback" not in proc.stderr and not out.exists()
    keep = tmp_path / "mine.json"
    keep.write_text("mine")
    os.mkfifo(tmp_path / "fifo")
    for trace, message in ((keep, "exists"), (tmp_path / "fifo", "not a regular file"),
                           (f"{tmp_path}/dir/", "names a folder")):
        proc = _train(["--chrome_trace", str(trace), "--output", str(out), "--overwrite"] if trace != keep else
                      ["--chrome_trace", str(trace), "--output", str(out)])
        assert proc.returncode == 2 and message in proc.stderr, proc.stderr
        assert not out.exists() and keep.read_text() == "mine"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["fifo", "mine.json"]


def test_output_with_a_trailing_slash_is_refused_not_written_as_a_file(tmp_path, capsys):
    """Side outputs: ``--output DIR/`` wrote a file named DIR; refused (exit 2), nothing created."""
    assert _fl(["--output", f"{tmp_path}/DIR/"]) == 2
    assert "names a folder" in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []


def test_export_to_a_trailing_slash_or_fifo_is_refused(tmp_path, capsys):
    """Side outputs: ``results export -o DIR/`` wrote a file named DIR; a FIFO would block."""
    run = tmp_path / "run.h5"
    assert _fl(["--output", str(run)]) == 0
    capsys.readouterr()
    os.mkfifo(tmp_path / "fifo")
    before = _listing(tmp_path)
    assert results_main(["export", "--fedscale", str(run), "-o", f"{tmp_path}/DIR/"]) == 2
    assert "names a folder" in capsys.readouterr().err
    assert results_main(["export", "--fedscale", str(run), "-o", str(tmp_path / "fifo"), "--overwrite"]) == 2
    assert "not a regular file" in capsys.readouterr().err
    assert results_main(["export", "--fedscale", str(run), "-o", str(run), "--overwrite"]) == 2
    assert "input" in capsys.readouterr().err
    assert _listing(tmp_path) == before
    assert results_main(["export", "--fedscale", str(run), "-o", str(tmp_path / "x.pkl")]) == 0
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]


def test_refused_tensorboard_folder_leaves_nothing_behind(tmp_path, capsys):
    """Side outputs: the TensorBoard run folder is checked with the others; a refused run creates no folder (was:
    created at start-up, before the refusal)."""
    pytest.importorskip("tensorboard")
    keep = tmp_path / "keep.h5"
    keep.write_bytes(b"mine")
    assert _fl(["--output", str(keep), "--tensorboard", str(tmp_path / "tb")]) == 2
    assert "exists" in capsys.readouterr().err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["keep.h5"]
    run = tmp_path / "tb" / "run"
    run.mkdir(parents=True)
    (run / "notes").write_text("mine")
    assert _fl(["--output", str(tmp_path / "run.h5"), "--tensorboard", str(tmp_path / "tb")]) == 2
    assert "not empty" in capsys.readouterr().err
    assert not (tmp_path / "run.h5").exists()


def test_an_undeclared_output_has_no_path():
    """Side outputs: a runner gets a path to write only for what its outputs() declared."""
    from hpcbench.fl.job import FLJob

    job = FLJob(None)
    with pytest.raises(KeyError, match="was not declared"):
        job.output_path("chrome_trace")


def test_every_side_writer_writes_through_a_temporary_file(tmp_path, monkeypatch):
    """Side outputs: a failure while writing leaves the old content and no temporary file."""
    target = tmp_path / "t.json"
    target.write_text("old")

    def broken(tmp):
        tmp.write_text("half")
        raise OSError(28, "No space left on device")

    with pytest.raises(OSError):
        replace_atomically(target, broken)
    assert target.read_text() == "old" and sorted(p.name for p in tmp_path.iterdir()) == ["t.json"]
    from hpcbench.results.chrome_trace import write_chrome_trace

    monkeypatch.setattr("hpcbench.results.chrome_trace.chrome_trace", lambda *a: {"traceEvents": []})
    write_chrome_trace(target, [])
    assert target.read_text().startswith("{") and sorted(p.name for p in tmp_path.iterdir()) == ["t.json"]


def test_overwrite_writes_beside_and_renames_at_the_end(tmp_path):
    """Concurrent runs: ``--overwrite`` never truncates the old file in place; it is replaced when the run ends."""
    path = tmp_path / "o.h5"
    ResultsFile(path, "unit", {"v": 1}).close()
    old = _digest(path)
    rf = ResultsFile(path, "unit", {"v": 2}, overwrite=True)
    rf.table("t", [Column("x", "f8", "s")]).append({"x": [1.0]})
    assert _digest(path) == old and read_attrs(path)["config"] == {"v": 1}
    assert in_use(path)
    rf.close()
    assert read_attrs(path)["config"] == {"v": 2} and not in_use(path)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["o.h5"]


# ------------------------------------------------------------------------------- part 2: concurrent runs
_HOLD = textwrap.dedent("""
    import sys, time
    from hpcbench.runtime.outputs import Output, claim_outputs
    claimed = claim_outputs([Output(sys.argv[1], sys.argv[2], folder=sys.argv[3] == "folder", may_exist=True)],
                            "holder-run")
    print("held", flush=True)
    sys.stdin.read()
""")


def _hold(key: str, path, folder: bool = False) -> subprocess.Popen:
    """Another process holding ``path`` as a run does (until its stdin closes)."""
    proc = subprocess.Popen([sys.executable, "-c", _HOLD, key, str(path), "folder" if folder else "file"],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=ENV)
    assert proc.stdout.readline().strip() == "held"
    return proc


def test_lock_is_refused_across_processes_taken_over_when_its_holder_dies(tmp_path):
    """Concurrent runs: a live holder is named in the refusal; a dead one's lock file is stale and taken over."""
    path = tmp_path / "o.h5"
    holder = _hold("output", path)
    with pytest.raises(InputError, match=r"in use by another run \(process \d+ on .*run holder-run"):
        OutputLock.acquire(path, "output")
    holder.kill()
    holder.wait()
    assert lock_path(path).exists() and not in_use(path)
    lock = OutputLock.acquire(path, "output", "mine")
    assert in_use(path)
    lock.release()
    assert not lock_path(path).exists()


def test_claim_is_all_or_nothing(tmp_path):
    """Concurrent runs: when one output is held, the others are not left locked nor their folders created."""
    holder = _hold("checkpoint", tmp_path / "c.ckpt")
    try:
        with pytest.raises(InputError, match="checkpoint.*in use"):
            claim_outputs([Output("output", tmp_path / "sub" / "o.h5"), Output("checkpoint", tmp_path / "c.ckpt")])
        assert not (tmp_path / "sub").exists() and not in_use(tmp_path / "sub" / "o.h5")
    finally:
        holder.stdin.close()
        holder.wait()


@pytest.mark.mpi
def test_a_running_job_cannot_be_overwritten_nor_its_checkpoint_shared(tmp_path, capsys):
    """Concurrent runs (two real processes): job A writes o.h5 and its checkpoint; job B with ``--overwrite o.h5``
    and job C with another output but A's ``--checkpoint`` exit 2 before touching anything (B used to truncate A's
    file, C to replace A's checkpoints silently); A is untouched."""
    out, ckpt = tmp_path / "o.h5", tmp_path / "o.h5.ckpt"
    a = subprocess.Popen([sys.executable, "-m", "hpcbench.fl", CONFIG, "--rounds", "100000", "--progress", "false",
                          "--checkpoint_interval", "1", "--output", str(out)], env=ENV, cwd=str(tmp_path),
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        deadline = time.monotonic() + 240
        while not (ckpt.exists() and in_use(out)) and time.monotonic() < deadline and a.poll() is None:
            time.sleep(0.2)
        assert ckpt.exists() and in_use(out), "job A did not start"
        run_id = read_attrs(out)["run_id"]
        assert _fl(["--output", str(out), "--overwrite"]) == 2
        err = capsys.readouterr().err
        assert "in use by another run" in err and run_id in err
        assert _fl(["--output", str(tmp_path / "c.h5"), "--checkpoint_interval", "1", "--checkpoint", str(ckpt),
                    "--overwrite"]) == 2
        assert "checkpoint" in capsys.readouterr().err
        assert not (tmp_path / "c.h5").exists()
        attrs = read_attrs(out)
        assert attrs["run_id"] == run_id and attrs["status"] == "running"
        assert a.poll() is None
    finally:
        os.killpg(a.pid, signal.SIGTERM)
        a.wait(60)
    assert a.returncode == 1
    attrs = read_attrs(out)
    assert attrs["run_id"] == run_id and attrs["status"] == "failed" and "SIGTERM" in attrs["error"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["o.h5", "o.h5.ckpt"]


@pytest.mark.mpi
def test_two_reproductions_into_one_folder(tmp_path):
    """Concurrent runs (two real processes): a second ``hpcbench reproduce --out D`` while one runs exits 2 at once,
    before writing anything in D (two used to corrupt each other's results)."""
    manifest = tmp_path / "m.yaml"
    from test_reproduce_run import MANIFEST

    manifest.write_text(textwrap.dedent(MANIFEST))
    out = tmp_path / "out"
    cmd = [sys.executable, "-m", "hpcbench.cli", "reproduce", "--manifest", str(manifest), "--out", str(out)]
    first = subprocess.Popen(cmd, cwd=str(ROOT), env=ENV, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                             start_new_session=True)
    try:
        deadline = time.monotonic() + 120
        while not in_use(out) and time.monotonic() < deadline and first.poll() is None:
            time.sleep(0.05)
        assert in_use(out), "the first reproduction did not start"
        second = subprocess.run(cmd, cwd=str(ROOT), env=ENV, capture_output=True, text=True, timeout=120)
        assert second.returncode == 2, second.stderr
        assert "--out" in second.stderr and "in use by another run" in second.stderr
        assert "Traceback" not in second.stderr
    finally:
        stdout, stderr = first.communicate(timeout=600)
    assert "Traceback" not in stderr
    assert (out / "ledger.jsonl").read_text().count('"kind": "run"') == 2  # only the first one ran its two jobs
    assert not lock_path(out).exists()


# ---------------------------------------------------------------------- part 5: reading a live file, write errors
_WRITER = textwrap.dedent("""
    import sys, threading, time
    import numpy as np
    from hpcbench.results import Column, ResultsFile
    rf = ResultsFile(sys.argv[1], "fl", {"job_name": "live"}, {"run_id": "live-run", "world_size": 1})
    rf.start_heartbeat(0.01)
    cols = [Column("round", "int64", "1"), Column("test_accuracy", "f8", "1"), Column("note", "str", "")]
    tables = [rf.table(f"t{k}", cols) for k in range(3)]
    stop = threading.Event()
    threading.Thread(target=lambda: (sys.stdin.read(), stop.set()), daemon=True).start()
    print("open", flush=True)
    i = 0
    deadline = time.monotonic() + 600
    while not stop.is_set() and time.monotonic() < deadline:  # appends until the test closes stdin
        i += 1
        time.sleep(0.002)
        for t in tables:
            t.append({"round": np.arange(i, i + 40), "test_accuracy": np.full(40, 0.5), "note": ["x" * (i % 50)] * 40})
        rf.set_attrs(**{f"a{i % 50}": "y" * (i % 300)})
    rf.close()
""")


def test_results_show_and_ls_on_a_live_file_never_fail(tmp_path, capsys):
    """Reading a live file: ``results show``/``ls`` on a file a run is appending to (many appends, attributes and
    heartbeats a second) report it running with what it holds, every time (was: a traceback or a failure about 1
    poll in 10)."""
    path = tmp_path / "live.h5"
    writer = subprocess.Popen([sys.executable, "-c", _WRITER, str(path)], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True, env=ENV)
    try:
        assert writer.stdout.readline().strip() == "open"
        polls = 0
        while writer.poll() is None and polls < 60:
            assert results_main(["show", str(path), "--rows", "2"]) == 0
            out = capsys.readouterr().out
            assert "status: running" in out and "t2:" in out, out[-2000:]
            assert results_main(["ls", str(tmp_path)]) == 0
            assert "running" in capsys.readouterr().out
            polls += 1
        assert polls >= 10
    finally:
        writer.stdin.close()
        writer.wait(120)


@pytest.fixture
def tiny_disk(tmp_path):
    """A 1 MiB tmpfs (root only): a real full disk."""
    mount = tmp_path / "disk"
    mount.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(mount)],
                      capture_output=True).returncode != 0:
        pytest.skip("cannot mount a tmpfs here (needs root)")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], capture_output=True)


def test_a_full_disk_marks_the_run_failed_and_show_reads_it(tiny_disk, capsys):
    """Write errors: ENOSPC while appending marks the run failed with the reason (in the file, or where the file
    cannot take it, in its lock file), and ``results show`` reports it without a traceback (was: ``running`` for
    ever and a crash)."""
    path = tiny_disk / "o.h5"
    rf = ResultsFile(path, "fl", {"job_name": "full"}, {"run_id": "r-full"})
    table = rf.table("rounds", [Column("round", "int64", "1"), Column("blob", "str", "")])
    with pytest.raises(OSError, match="No space left") as err:
        for i in range(10_000):
            table.append({"round": [i], "blob": [os.urandom(4000).hex()]})
    rf.close("failed", error=f"OSError: {err.value}")
    status = file_status(path)
    assert status.state == "failed" and ("No space" in status.detail or "space" in status.detail.lower()), status
    code = results_main(["show", str(path)])
    captured = capsys.readouterr()
    assert "Traceback" not in captured.err
    assert (code == 0 and "status: failed" in captured.out) or (code == 2 and "failed" in captured.err)


def test_a_write_error_in_a_job_marks_the_file_failed(tmp_path, monkeypatch, capsys):
    """Write errors: an EIO while the job appends ends it with exit 1 and the file ``failed`` naming the error."""
    from hpcbench.results import writer

    real = writer.Table._append
    calls = {"n": 0}

    def failing(self, rows, flush):
        calls["n"] += 1
        if calls["n"] > 3:
            raise OSError(5, "Input/output error")
        return real(self, rows, flush)

    monkeypatch.setattr(writer.Table, "_append", failing)
    out = tmp_path / "o.h5"
    assert _fl(["--output", str(out)]) == 1
    assert "Input/output error" in capsys.readouterr().err
    status = file_status(out)
    assert status.state == "failed" and "Input/output error" in status.detail
    assert sorted(p.name for p in tmp_path.iterdir()) == ["o.h5"]


def test_a_refused_resume_leaves_no_temporary_file(tmp_path, capsys):
    """Side outputs: a refused resume leaves the folder as it was (was: ``.o.h5.ckpt.*.tmp`` left behind)."""
    out = tmp_path / "run.h5"
    assert _fl(["--checkpoint_interval", "2", "--output", str(out)]) == 0
    before = _listing(tmp_path)
    assert _fl(["--resume", str(tmp_path / "run.h5.ckpt"), "--seed", "7", "--checkpoint_interval", "2",
                "--output", str(out)]) == 2
    assert "differs" in capsys.readouterr().err
    assert _listing(tmp_path) == before
    assert not any(p.name.startswith(".") for p in tmp_path.iterdir())


def test_a_killed_writers_temporary_is_removed_by_the_next_holder(tmp_path):
    """Side outputs: a temporary a kill left beside an output (``.o.h5.ckpt.XXXX.tmp``) is removed once the next run
    holds that output; another output's temporaries are not touched."""
    from hpcbench.runtime.outputs import temp_beside

    stale = temp_beside(tmp_path / "o.h5.ckpt")
    other = temp_beside(tmp_path / "o.h5.ckpt.old")
    claimed = claim_outputs([Output("checkpoint", tmp_path / "o.h5.ckpt")])
    claimed.release()
    assert not stale.exists() and other.exists()


def test_an_abort_removes_the_temporary_being_written(tmp_path):
    """Side outputs: the lifecycle's failure path discards a temporary another thread is writing (the abort that
    follows would leave it), and the target keeps its old content."""
    from hpcbench.runtime.outputs import discard_pending

    target = tmp_path / "c.ckpt"
    target.write_text("previous checkpoint")

    def write(tmp):
        tmp.write_text("half")
        discard_pending()  # as the failure listener does while the main thread writes

    with pytest.raises(OSError):
        replace_atomically(target, write)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["c.ckpt"] and target.read_text() == "previous checkpoint"


def test_a_figure_follows_the_output_rules(tmp_path, capsys):
    """Side outputs: figures (``analysis/_style.save_figure``) never replace an input, refuse ``DIR/``, and are
    written through a temporary file."""
    sys.path.insert(0, str(ROOT / "analysis"))
    try:
        import _style
    finally:
        sys.path.remove(str(ROOT / "analysis"))
    data = tmp_path / "run.h5"
    data.write_bytes(b"results")
    for bad, message in (([data], "input"), ([f"{tmp_path}/figs/"], "names a folder")):
        fig = _style.pyplot().figure()
        with pytest.raises(SystemExit) as code:
            _style.save_figure(fig, bad, [data])
        assert code.value.code == 2 and message in capsys.readouterr().err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run.h5"] and data.read_bytes() == b"results"
    fig = _style.pyplot().figure()
    _style.save_figure(fig, [tmp_path / "f.png", tmp_path / "f.pdf"], [data])
    assert sorted(p.name for p in tmp_path.iterdir()) == ["f.pdf", "f.png", "run.h5"]
    assert (tmp_path / "f.png").read_bytes()[:4] == b"\x89PNG" and (tmp_path / "f.pdf").read_bytes()[:4] == b"%PDF"

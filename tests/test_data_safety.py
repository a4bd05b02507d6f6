"""The data-safety guarantees of docs/architecture.md ("Data-safety guarantees"), in-process at size 1.

What a checkpoint and a resume may touch (issue 18 items 1-5): ``--checkpoint``
never names or replaces the results file nor any existing file without
``--overwrite``; a checkpoint is verified (digest, schema) and belongs to its
run (``run_id``) before anything is modified; unwritable paths and missing
absolute folders are refused before the run starts. Also the fault-injection
spec (item 8), file-name templates (item 14), messages about paths (item 15)
and the result-file states ``hpcbench results show`` reports (item 6).
"""

from __future__ import annotations

import hashlib
import io
import os
import pickle
import time
import warnings
from datetime import datetime, timedelta, timezone
from pathlib import Path

import numpy as np
import pytest

from hpcbench.fl.checkpoint import load_checkpoint, save_checkpoint
from hpcbench.results import Column, ResultsFile, read_attrs, read_table
from hpcbench.results.status import STALE_S, classify, file_status
from hpcbench.results_command import main as results_main
from hpcbench.runtime.errors import InputError
from hpcbench.runtime.output_names import format_output_path
from mpitools import ROOT

CONFIG = str(ROOT / "jobs" / "configs" / "digits.yaml")
FAST = ["--rounds", "2", "--eval_interval", "1", "--progress", "false", "--traces.availability.format", "none"]


def _fl(argv) -> int:
    from hpcbench.fl.job import FLJob
    from hpcbench.lifecycle import run

    return run(FLJob, [CONFIG, *FAST, *argv])


def _digest(path: Path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


@pytest.fixture
def run_with_checkpoint(tmp_path):
    """A completed 2-round run with its checkpoint after round 2."""
    out = tmp_path / "run.h5"
    assert _fl(["--checkpoint_interval", "2", "--output", str(out)]) == 0
    return out, tmp_path / "run.h5.ckpt"


# --------------------------------------------------------------- item 1: --checkpoint and the output
def test_checkpoint_naming_the_output_is_refused(tmp_path, capsys):
    out = tmp_path / "a.h5"
    assert _fl(["--checkpoint_interval", "1", "--output", str(out), "--checkpoint", str(out)]) == 2
    assert "is the results file itself" in capsys.readouterr().err
    assert not out.exists()
    # the template {output} (alone, as the shell passes it) is the same file: reported as such
    assert _fl(["--checkpoint_interval", "1", "--output", str(out), "--checkpoint", "{output}"]) == 2
    err = capsys.readouterr().err
    assert "checkpoint" in err and "is the results file itself" in err and "{'output': None}" not in err
    assert not out.exists()


def test_checkpoint_never_replaces_an_existing_file_without_overwrite(tmp_path, capsys):
    keep = tmp_path / "notes.txt"
    keep.write_text("precious")
    out = tmp_path / "b.h5"
    assert _fl(["--checkpoint_interval", "1", "--output", str(out), "--checkpoint", str(keep)]) == 2
    assert "exists" in capsys.readouterr().err and keep.read_text() == "precious" and not out.exists()
    assert _fl(["--checkpoint_interval", "1", "--output", str(out), "--checkpoint", str(keep), "--overwrite"]) == 0
    assert load_checkpoint(keep)["step"] == 2  # replaced, as asked


# ------------------------------------------------------------------- item 2: verified checkpoints
def test_corrupted_checkpoint_is_refused_and_nothing_is_touched(run_with_checkpoint, capsys):
    out, ckpt = run_with_checkpoint
    data = bytearray(ckpt.read_bytes())
    middle = len(data) // 2
    data[middle:middle + 200] = bytes(b ^ 0xFF for b in data[middle:middle + 200])
    ckpt.write_bytes(bytes(data))
    before = _digest(out)
    assert _fl(["--rounds", "4", "--resume", str(ckpt)]) == 2
    assert "does not match its SHA-256 digest" in capsys.readouterr().err
    assert _digest(out) == before and read_attrs(out)["status"] == "completed"


@pytest.mark.parametrize("drop", ["params", "run_id", "tables"])
def test_checkpoint_missing_an_entry_is_refused_before_the_results_file_is_opened(run_with_checkpoint, drop,
                                                                                   capsys):
    out, ckpt = run_with_checkpoint
    state = load_checkpoint(ckpt)
    del state[drop]
    save_checkpoint(ckpt, state)  # a valid digest over an incomplete checkpoint
    before = _digest(out)
    assert _fl(["--rounds", "4", "--resume", str(ckpt)]) == 2
    err = capsys.readouterr().err
    assert f"missing entry {drop!r}" in err and "Traceback" not in err
    assert _digest(out) == before


def test_checkpoint_with_arbitrary_objects_is_never_unpickled(tmp_path, capsys):
    """A digest-valid file whose payload asks for a global: torch's weights-only loader refuses it."""
    import hashlib as h
    import json

    import torch

    buffer = io.BytesIO()
    torch.save({"format": "hpcbench-fl-checkpoint/2", "payload": _Arbitrary()}, buffer)
    payload = buffer.getvalue()
    header = json.dumps({"format": "hpcbench-fl-checkpoint/2", "sha256": h.sha256(payload).hexdigest(),
                         "bytes": len(payload)}).encode()
    ckpt = tmp_path / "evil.ckpt"
    ckpt.write_bytes(b"HPCBENCH-FL-CHECKPOINT\n" + header + b"\n" + payload)
    assert _fl(["--resume", str(ckpt), "--output", str(tmp_path / "o.h5")]) == 2
    assert "not a readable checkpoint" in capsys.readouterr().err
    assert not (tmp_path / "o.h5").exists()


class _Arbitrary:
    pass


# --------------------------------------------------------- item 3: a resume appends to its own file only
def test_checkpoint_naming_another_runs_file_is_refused(tmp_path, run_with_checkpoint, capsys):
    _, ckpt = run_with_checkpoint
    other = tmp_path / "other.h5"
    assert _fl(["--output", str(other)]) == 0
    state = load_checkpoint(ckpt)
    state["output"] = str(other.resolve())  # a crafted checkpoint: valid digest, another run's file
    save_checkpoint(ckpt, state)
    before = _digest(other)
    assert _fl(["--rounds", "4", "--resume", str(ckpt)]) == 2
    assert "is not the results file of this checkpoint's run" in capsys.readouterr().err
    assert _digest(other) == before


def test_resume_from_another_working_directory_appends_to_the_same_file(tmp_path, monkeypatch):
    """Checkpoints store the results file's absolute path (with its run id), not the relative one given."""
    work, elsewhere = tmp_path / "work", tmp_path / "elsewhere"
    work.mkdir()
    elsewhere.mkdir()
    monkeypatch.chdir(work)
    assert _fl(["--checkpoint_interval", "2", "--output", "res/run.h5"]) == 0
    run_id = read_attrs(work / "res" / "run.h5")["run_id"]
    assert len(run_id) == 32 and load_checkpoint(work / "res" / "run.h5.ckpt")["run_id"] == run_id
    monkeypatch.chdir(elsewhere)
    assert _fl(["--rounds", "3", "--checkpoint_interval", "2", "--resume", str(work / "res" / "run.h5.ckpt")]) == 0
    np.testing.assert_array_equal(read_table(work / "res" / "run.h5", "rounds")["round"], [1, 2, 3])
    assert read_attrs(work / "res" / "run.h5")["run_id"] == run_id
    assert not list(elsewhere.iterdir())


# --------------------------------------------------- item 4, 5: paths checked before the run starts
@pytest.mark.parametrize("path, needle", [("/proc/hpcbench-nope/x.ckpt", "does not exist"),
                                          ("/proc/x.ckpt", "not writable")])
def test_unwritable_checkpoint_path_exits_2_before_the_run(tmp_path, path, needle, capsys):
    out = tmp_path / "o.h5"
    assert _fl(["--checkpoint_interval", "1", "--output", str(out), "--checkpoint", path]) == 2
    err = capsys.readouterr().err
    assert "checkpoint" in err and needle in err and "Traceback" not in err
    assert not out.exists()


def test_absolute_output_folders_are_never_created_relative_ones_are(tmp_path, monkeypatch, capsys):
    missing = tmp_path / "no-such-folder" / "deeper"
    assert _fl(["--output", str(missing / "x.h5")]) == 2
    assert "does not exist" in capsys.readouterr().err and not (tmp_path / "no-such-folder").exists()
    monkeypatch.chdir(tmp_path)
    assert _fl(["--output", "made/here/x.h5"]) == 0
    assert read_attrs(tmp_path / "made" / "here" / "x.h5")["status"] == "completed"
    assert _fl(["--output", str(tmp_path)]) == 2
    assert "is a directory" in capsys.readouterr().err


# ------------------------------------------------------------------------ item 8: fault-injection spec
@pytest.mark.parametrize("spec, needle", [("99:2:raise", "RANK 99 is not a rank"), ("0:0:raise", "STEP 0"),
                                          ("0:3:raise", "beyond the 2 steps"), ("0:x:raise", "RANK:STEP:MODE")])
def test_out_of_range_fault_spec_is_an_input_error(tmp_path, spec, needle, capsys):
    assert _fl(["--output", str(tmp_path / "o.h5"), "--fault-inject", spec]) == 2
    assert needle in capsys.readouterr().err
    assert not (tmp_path / "o.h5").exists()


# ------------------------------------------------------------------------- item 14: plain templates
@pytest.mark.parametrize("template", ["res/{job_name.__class__}.h5", "res/{job_name[0]}.h5", "res/{job_name!r}.h5",
                                      "res/{job_name:>40}.h5", "res/{}.h5", "res/{0}.h5"])
def test_templates_allow_plain_field_names_only(template):
    with pytest.raises(InputError, match="only plain field names|bad file-name template"):
        format_output_path(template, {"job_name": "j", "start": "s"})
    assert format_output_path("res/{job_name}-{start}.h5", {"job_name": "j", "start": "s"}) == Path("res/j-s.h5")


def test_attribute_template_exits_2_and_creates_nothing(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert _fl(["--output", "res/{job_name.__class__}.h5"]) == 2
    assert "job_name.__class__" in capsys.readouterr().err and not (tmp_path / "res").exists()


# ------------------------------------------------------------- item 15: directories, torch's warning
def test_a_directory_where_a_file_is_expected_is_called_a_directory(tmp_path, capsys):
    assert _fl(["--resume", str(tmp_path), "--output", str(tmp_path / "o.h5")]) == 2
    assert "is a directory" in capsys.readouterr().err
    assert _fl(["--traces.bandwidth.path", str(tmp_path), "--output", str(tmp_path / "o.h5")]) == 2
    assert "is a directory" in capsys.readouterr().err
    assert results_main(["export", "--fedscale", str(tmp_path)]) == 2
    assert "is a directory" in capsys.readouterr().err
    assert not (tmp_path / "o.h5").exists()


def test_foreign_checkpoint_files_raise_no_loader_warning(tmp_path):
    """torch's non-zip and pickle-protocol warnings (once per rank before) never appear: no unverified byte
    reaches torch.load."""
    for name, data in (("p.ckpt", pickle.dumps({"format": "x"}, protocol=4)), ("t.ckpt", b"not a checkpoint")):
        path = tmp_path / name
        path.write_bytes(data)
        with warnings.catch_warnings(record=True) as seen:
            warnings.simplefilter("always")
            with pytest.raises(InputError, match="not an hpcbench fl checkpoint"):
                load_checkpoint(path)
        assert not seen, [str(w.message) for w in seen]


# ------------------------------------------------------ item 6: a killed run's file reads as interrupted
def _state(**attrs):
    return {"status": "running", "writer_host": "node-a", "writer_pid": 1, **attrs}


def test_classify_tells_running_from_interrupted_by_the_heartbeat():
    now = datetime(2026, 1, 1, 12, 0, 0, tzinfo=timezone.utc)
    fresh, stale = now - timedelta(seconds=5), now - timedelta(seconds=STALE_S + 1)
    assert classify(_state(heartbeat=fresh.isoformat()), now, host="node-b").state == "running"
    assert classify(_state(heartbeat=stale.isoformat()), now, host="node-b").state == "interrupted"
    dead = _state(heartbeat=fresh.isoformat(), writer_host="node-b", writer_pid=2**22 + 12345)
    assert classify(dead, now, host="node-b").state == "interrupted"  # its process is gone, however recent
    alive = _state(heartbeat=fresh.isoformat(), writer_host="node-b", writer_pid=os.getpid())
    assert classify(alive, now, host="node-b").state == "running"
    assert classify({"status": "failed", "error": "rank 3: boom"}, now).detail == "rank 3: boom"
    assert classify({"status": "running"}, now).state == "running"  # an older file: cannot tell, says so


def test_heartbeat_is_refreshed_and_a_vanished_writer_reads_interrupted(tmp_path, capsys):
    path = tmp_path / "r.h5"
    rf = ResultsFile(path, "unit", {})
    rf.table("t", [Column("x", "f8", "1")]).append({"x": [1.0]})

    def beat():
        with rf._lock:
            return rf._h5.attrs["heartbeat"]

    first = beat()
    rf.start_heartbeat(0.05)
    deadline = time.monotonic() + 10
    while beat() == first and time.monotonic() < deadline:  # ISO seconds: the next second's write differs
        time.sleep(0.1)
    assert beat() != first
    with rf._lock:
        assert classify(dict(rf._h5.attrs.items())).state == "running"  # this process writes it
    rf._beat_stop.set()
    rf._h5.close()  # as a SIGKILL leaves it: no close(), status running
    with h5py_file(path) as h5:
        h5.attrs["writer_pid"] = 2**22 + 12345  # a process that no longer exists
    assert file_status(path).state == "interrupted"
    assert results_main(["show", str(path)]) == 0
    assert "interrupted" in capsys.readouterr().out


def test_mark_failed_sticks(tmp_path):
    """What rank 0 does on another rank's failure notice: failed now, and a later close keeps it."""
    path = tmp_path / "r.h5"
    rf = ResultsFile(path, "unit", {})
    rf.mark_failed("rank 2: RuntimeError: boom")
    with rf._lock:
        assert rf._h5.attrs["status"] == "failed"
    rf.close("completed")
    attrs = read_attrs(path)
    assert attrs["status"] == "failed" and attrs["error"].startswith("rank 2: RuntimeError: boom")


def h5py_file(path):
    import h5py

    return h5py.File(path, "r+")


def test_the_guarantees_are_documented_with_their_tests():
    """docs/architecture.md states the data-safety guarantees; every test file and script it cites exists."""
    import re

    doc = (ROOT / "docs" / "architecture.md").read_text()
    section = doc[doc.index("## Data-safety guarantees"):]
    section = section[:section.index("\n## ", 3)]
    for topic in ("**Bad input**", "**Paths**", "**A fault on any rank**", "**A kill**", "**A resume**",
                  "**`--overwrite`**"):
        assert topic in section, topic
    cited = re.findall(r"`((?:tests|scripts)/[\w/]+\.py)`", section)
    assert "tests/test_data_safety.py" in cited and all((ROOT / c).is_file() for c in cited), cited


@pytest.mark.mpi
def test_hostile_input_battery_sample(capsys):
    """A few of scripts/hostile_inputs.py's cases (the whole battery is a script, run by hand)."""
    import importlib.util
    import sys

    spec = importlib.util.spec_from_file_location("hostile_inputs", ROOT / "scripts" / "hostile_inputs.py")
    battery = sys.modules["hostile_inputs"] = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(battery)
    assert len(battery.cases()) >= 150
    assert battery.main(["--sample", "60", "--limit-s", "60"]) == 0, capsys.readouterr().out[-3000:]


@pytest.mark.mpi
def test_refused_output_after_prepare_releases_what_prepare_started(tmp_path):
    """The collectives benchmark starts Horovod/gloo in prepare: a refused --output ended in a segmentation
    fault (exit 11: MPI called after MPI_Finalize) instead of exit 2; Job.release now stops them."""
    from mpitools import run_mpi

    out = tmp_path / "keep.h5"
    out.write_bytes(b"earlier results")
    proc = run_mpi(1, ["-m", "hpcbench.bench.collectives", "-b", "1K", "-e", "1K", "--output", str(out)],
                   timeout=120)
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert "exists" in proc.stderr and "after finalizing" not in proc.stderr
    assert out.read_bytes() == b"earlier results"

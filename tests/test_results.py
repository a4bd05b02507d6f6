"""hpcbench.results: round trip with units, refusing existing files, and the SIGKILL-safe flush."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time

import h5py
import numpy as np
import pytest

from hpcbench.results import Column, ResultsFile, read_attrs, read_table

COLUMNS = [Column("step", "int32", "1", "step number"), Column("time_s", "float64", "s", "duration"),
           Column("name", "str", "1", "label")]


def test_round_trip_with_units_and_provenance(tmp_path):
    path = tmp_path / "sub" / "r.h5"
    config = {"a": 1, "nested": {"b": [1, 2]}, "p": tmp_path}
    with ResultsFile(path, "unit", config, {"seed": 7, "hostnames": "h0,h1"}) as rf:
        t = rf.table("steps", COLUMNS, "one row per step")
        t.append({"step": [1, 2], "time_s": [0.5, 0.25], "name": ["x", "é"]})
        t.append({"step": 3, "time_s": 1.0, "name": "z"})
        assert t.rows == 3
        rf.write_array("model/w", np.arange(6, dtype=np.float32).reshape(2, 3), "1", "weights")
        rf.set_attrs(final=0.5)
    table = read_table(path, "steps")
    assert table["step"].tolist() == [1, 2, 3] and table["step"].dtype == np.int32
    assert table["time_s"].tolist() == [0.5, 0.25, 1.0]
    assert table["name"].tolist() == ["x", "é", "z"]
    attrs = read_attrs(path)
    assert attrs["kind"] == "unit" and attrs["status"] == "completed" and attrs["seed"] == 7
    assert attrs["final"] == 0.5 and attrs["config"] == {"a": 1, "nested": {"b": [1, 2]}, "p": str(tmp_path)}
    assert attrs["end_time"] and attrs["schema_version"] == 1
    with h5py.File(path, "r") as h5:
        assert h5["steps/time_s"].attrs["units"] == "s"
        assert h5["steps/step"].attrs["description"] == "step number"
        assert json.loads(h5["steps"].attrs["columns"]) == ["step", "time_s", "name"]
        assert h5["model/w"].shape == (2, 3) and h5["model/w"].attrs["units"] == "1"


def test_failure_inside_block_marks_file_failed(tmp_path):
    path = tmp_path / "f.h5"
    with pytest.raises(RuntimeError):
        with ResultsFile(path, "unit", {}) as rf:
            rf.table("steps", COLUMNS).append({"step": 1, "time_s": 1.0, "name": "a"})
            raise RuntimeError("boom")
    attrs = read_attrs(path)
    assert attrs["status"] == "failed" and "boom" in attrs["error"]
    assert read_table(path, "steps")["step"].tolist() == [1]


def test_existing_file_refused_unless_overwrite(tmp_path):
    path = tmp_path / "r.h5"
    path.write_bytes(b"precious")
    with pytest.raises(FileExistsError):
        ResultsFile(path, "unit", {})
    assert path.read_bytes() == b"precious"
    ResultsFile(path, "unit", {}, overwrite=True).close()
    assert read_attrs(path)["kind"] == "unit"


def test_append_checks_columns_and_lengths(tmp_path):
    with ResultsFile(tmp_path / "r.h5", "unit", {}) as rf:
        t = rf.table("steps", COLUMNS)
        with pytest.raises(KeyError, match="missing"):
            t.append({"step": 1, "time_s": 1.0})
        with pytest.raises(KeyError, match="unknown"):
            t.append({"step": 1, "time_s": 1.0, "name": "a", "extra": 2})
        with pytest.raises(ValueError, match="length"):
            t.append({"step": [1, 2], "time_s": [1.0], "name": ["a", "b"]})
        assert t.rows == 0


def test_sigkill_leaves_every_flushed_row(tmp_path):
    """A writer killed with SIGKILL mid-run leaves a readable file with each appended row."""
    path = tmp_path / "killed.h5"
    script = textwrap.dedent(f"""
        import sys, time
        from hpcbench.results import Column, ResultsFile
        rf = ResultsFile({str(path)!r}, "unit", {{}})
        t = rf.table("steps", [Column("step", "int64", "1"), Column("v", "float64", "s")])
        for i in range(1, 100000):
            t.append({{"step": i, "v": i * 0.5}})
            print(i, flush=True)
            time.sleep(0.005)
    """)
    proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True,
                            env=dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path)))
    last = 0
    deadline = time.time() + 60
    while last < 20 and time.time() < deadline:
        line = proc.stdout.readline()
        if not line:
            break
        last = int(line)
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)
    assert last >= 20
    with h5py.File(path, "r", locking=False) as h5:
        assert h5.attrs["status"] == "running"
        rows = int(h5["steps"].attrs["rows"])
    assert rows >= last
    table = read_table(path, "steps")
    assert table["step"].tolist() == list(range(1, rows + 1))
    assert np.allclose(table["v"], table["step"] * 0.5)

"""hpcbench results ls/show/diff/tensorboard on fixture files, and --tensorboard on a live run."""

from __future__ import annotations

import math
import re

import numpy as np
import pytest

from hpcbench.results import Column, ResultsFile
from hpcbench.results_command import main as results_main
from mpitools import run_mpi

ROUNDS = [Column("round", "int32", "1"), Column("virtual_time_s", "float64", "s"),
          Column("wall_time_s", "float64", "s"), Column("test_accuracy", "float64", "1"),
          Column("train_loss", "float64", "nat")]


def _fl_file(path, lr: float, accuracy: list[float], reached: bool = True, status: str = "completed"):
    config = {"job_name": "digits-fedavg", "rounds": len(accuracy), "learning_rate": lr,
              "selection": {"name": "random"}}
    attrs = {"world_size": 2, "start_time": "2026-01-01T00:00:00+00:00", "job_name": "digits-fedavg",
             "target_accuracy": 0.9, "time_to_accuracy_s": 120.0 if reached else math.nan,
             "rounds_to_accuracy": 2 if reached else -1, "hostnames": "a,a", "mpi_library_version": "MPICH 5"}
    rf = ResultsFile(path, "fl", config, attrs)
    t = rf.table("rounds", ROUNDS, "one row per round")
    for i, acc in enumerate(accuracy, start=1):
        t.append({"round": i, "virtual_time_s": 60.0 * i, "wall_time_s": 0.5 * i, "test_accuracy": acc,
                  "train_loss": 1.0 / i})
    rf.set_attrs(final_test_accuracy=accuracy[-1] if accuracy[-1] == accuracy[-1] else math.nan,
                 rounds_completed=len(accuracy), wall_s=0.5 * len(accuracy))
    if status == "running":
        rf._h5.close()   # killed: the status stays 'running'
    else:
        rf.close(status)
    return path


@pytest.fixture
def files(tmp_path):
    a = _fl_file(tmp_path / "runs" / "a.h5", 0.1, [0.5, 0.91, math.nan, 0.95])
    b = _fl_file(tmp_path / "runs" / "b.h5", 0.2, [0.4, 0.6, 0.7], reached=False)
    c = _fl_file(tmp_path / "runs" / "deep" / "c.h5", 0.1, [0.3], reached=False, status="running")
    (tmp_path / "runs" / "junk.h5").write_bytes(b"not hdf5")
    return a, b, c


def test_ls_lists_every_file_with_status_and_key_figure(files, capsys):
    a, b, c = files
    assert results_main(["ls", str(a.parent)]) == 0
    out = capsys.readouterr().out
    lines = {line.split()[0]: line for line in out.splitlines()[1:]}
    header = out.splitlines()[0].split()
    assert header[:6] == ["file", "runner", "job", "status", "ranks", "start"]
    assert "completed" in lines[str(a)] and "time to accuracy 0.9 120 s virtual" in lines[str(a)]
    assert "n/a (target 0.9 not reached)" in lines[str(b)]
    assert "running" in lines[str(c)]
    assert "unreadable" in lines[str(a.parent / "junk.h5")]
    assert not re.search(r"\bnan\b", out)


def test_show_prints_provenance_config_tables_with_units_and_headlines(files, capsys):
    a, _, _ = files
    assert results_main(["show", str(a), "--rows", "all"]) == 0
    out = capsys.readouterr().out
    for needed in ("status: completed", "provenance:", "mpi_library_version", "config:", "learning_rate: 0.1",
                   "rounds: 4 rows", "virtual_time_s  s", "(nat)", "headline figures:", "final test accuracy"):
        assert needed in out, needed
    assert not re.search(r"\bnan\b", out) and "n/a" in out    # round 3 was not evaluated


def test_diff_shows_differing_config_and_headlines_side_by_side(files, capsys):
    a, b, _ = files
    assert results_main(["diff", str(a), str(b)]) == 0
    out = capsys.readouterr().out
    assert "learning_rate  0.1  0.2" in out and "rounds" in out and "job_name" not in out.split("provenance")[0]
    row = next(line for line in out.splitlines() if line.strip().startswith("final test accuracy"))
    assert row.split()[-2:] == ["0.737", "1"] or "0.737" in row      # 0.7 / 0.95
    assert not re.search(r"\bnan\b", out)


def test_bad_files_exit_2_naming_them(files, tmp_path, capsys):
    assert results_main(["show", str(tmp_path / "missing.h5")]) == 2
    assert "missing.h5" in capsys.readouterr().err
    junk = files[0].parent / "junk.h5"
    assert results_main(["diff", str(files[0]), str(junk)]) == 2
    assert "junk.h5" in capsys.readouterr().err and "not an HDF5 file" in capsys.readouterr().err + \
        "not an HDF5 file"


def _scalars(run_dir) -> dict[str, list[tuple[int, float]]]:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    ea = EventAccumulator(str(run_dir), size_guidance={"scalars": 0, "tensors": 0})
    ea.Reload()
    out = {tag: [(e.step, e.value) for e in ea.Scalars(tag)] for tag in ea.Tags()["scalars"]}
    out["_tensors"] = ea.Tags()["tensors"]
    return out


def test_tensorboard_export_of_a_finished_run(files, tmp_path, capsys):
    pytest.importorskip("tensorboard")
    a, _, _ = files
    assert results_main(["tensorboard", str(a), str(tmp_path / "tb")]) == 0
    assert "tensorboard --logdir" in capsys.readouterr().out
    got = _scalars(tmp_path / "tb" / "a")
    assert [s for s, _ in got["rounds/test_accuracy"]] == [1, 2, 4]       # round 3's NaN left out
    np.testing.assert_allclose([v for _, v in got["rounds/test_accuracy"]], [0.5, 0.91, 0.95], rtol=1e-6)
    assert [v for _, v in got["rounds/virtual_time_s"]] == [60.0, 120.0, 180.0, 240.0]
    assert "config" in got["_tensors"]


def test_without_tensorboard_the_flag_is_an_input_error(monkeypatch):
    import importlib.util

    from hpcbench.results.tensorboard import require_tensorboard
    from hpcbench.runtime.errors import InputError

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "tensorboard" else real(name, *a))
    with pytest.raises(InputError, match=r"pip install -e '\.\[tensorboard\]'"):
        require_tensorboard()


@pytest.mark.mpi
def test_live_tensorboard_scalars_match_the_results_file(tmp_path):
    pytest.importorskip("tensorboard")
    out, tb = tmp_path / "run.h5", tmp_path / "tb"
    proc = run_mpi(2, ["-m", "hpcbench.fl", "jobs/configs/digits.yaml", "--rounds", "4", "--eval_interval", "2",
                       "--progress", "false", "--output", str(out), "--tensorboard", str(tb)])
    assert proc.returncode == 0, proc.stderr[-3000:]
    from hpcbench.results import read_table

    rounds = read_table(out, "rounds")
    got = _scalars(tb / "run")
    evaluated = ~np.isnan(rounds["test_accuracy"])
    assert [s for s, _ in got["rounds/test_accuracy"]] == rounds["round"][evaluated].tolist()
    np.testing.assert_allclose([v for _, v in got["rounds/test_accuracy"]], rounds["test_accuracy"][evaluated],
                               rtol=1e-6)
    np.testing.assert_allclose([v for _, v in got["rounds/virtual_time_s"]], rounds["virtual_time_s"], rtol=1e-6)
    assert "rounds/train_loss" in got and "config" in got["_tensors"]

"""``python -m hpcbench.pipeline`` end to end: results, emulated timing, bad input, infeasible caps."""

from __future__ import annotations

import numpy as np
import pytest

from hpcbench.results import read_attrs, read_table
from mpitools import run_mpi

SMALL = ["--model.layers", "5", "--model.hidden", "16", "--model.heads", "2", "--model.seq_len", "8",
         "--batch_size", "8", "--micro_batches", "4", "--iterations", "3", "--warmup", "1"]


@pytest.mark.mpi
def test_emulated_run_records_predicted_and_measured(tmp_path):
    """Three stages on 4:1 devices; the figure script reads the file."""
    out = tmp_path / "p.h5"
    proc = run_mpi(3, ["-m", "hpcbench.pipeline", "jobs/configs/pipeline-quick.yaml", *SMALL,
                       "--compute", "emulated", "--time_dilation", "40", "--link.kind", "model",
                       "--allocators", "[even, sky-dynamic, optimal]", "--schedule", "1f1b",
                       "--output", str(out)], timeout=240)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    rows = read_table(out, "allocations")
    assert list(rows["allocator"]) == ["even", "sky-dynamic", "optimal"]
    assert np.all(rows["predicted_iteration_s"] > 0) and np.all(rows["measured_iteration_s"] > 0)
    # 4:1 devices: the exact allocation beats the even split, in prediction and in the run
    assert rows["predicted_iteration_s"][2] < rows["predicted_iteration_s"][0]
    assert rows["measured_iteration_s"][2] < rows["measured_iteration_s"][0]
    tl = read_table(out, "timeline")
    assert len(tl["stage"]) == 3 * 3 * 2 * 4   # allocators x stages x (F, B) x micro-batches
    attrs = read_attrs(out)
    assert attrs["compute_mode"] == "emulated" and attrs["status"] == "completed"
    import subprocess
    import sys

    from mpitools import ROOT

    png = tmp_path / "p.png"
    proc = subprocess.run([sys.executable, "analysis/plot_pipeline.py", str(out), "-o", str(png)],
                          capture_output=True, text=True, cwd=str(ROOT), timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert png.read_bytes()[:4] == b"\x89PNG" and "optimal" in proc.stdout


@pytest.mark.mpi
def test_chrome_trace_beside_the_results(tmp_path):
    """Emulated, modelled links: every rank's F/B per micro-batch, waits, sends and steps, valid JSON."""
    import json

    from hpcbench.results.chrome_trace import validate

    out = tmp_path / "t.h5"
    proc = run_mpi(2, ["-m", "hpcbench.pipeline", "jobs/configs/pipeline-quick.yaml", *SMALL,
                       "--compute", "emulated", "--time_dilation", "20", "--link.kind", "model",
                       "--allocators", "[even]", "--chrome_trace", "true", "--output", str(out)], timeout=180)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    path = tmp_path / "t.trace.json"
    assert read_attrs(out)["chrome_trace"] == str(path)
    trace = json.loads(path.read_text())
    validate(trace)
    spans = [e for e in trace["traceEvents"] if e["ph"] == "X"]
    iterations = 1 + 3                                   # warm-up + measured
    for rank in (0, 1):
        mine = [e for e in spans if e["pid"] == rank]
        assert sum(e["cat"] == "compute" for e in mine) == iterations * 2 * 4      # F and B per micro-batch
        assert sum(e["name"].startswith("send") for e in mine) == iterations * 4
        assert sum(e["cat"] == "optimizer" for e in mine) == iterations
    waits = [e for e in spans if e["name"].startswith("wait activation") and e["pid"] == 1]
    assert waits and all(e["dur"] >= 0 for e in waits)
    # a given path that exists is refused (exit 2, no results file)
    again = tmp_path / "again.h5"
    proc = run_mpi(2, ["-m", "hpcbench.pipeline", "jobs/configs/pipeline-quick.yaml", *SMALL,
                       "--allocators", "[even]", "--chrome_trace", str(path), "--output", str(again)], timeout=120)
    assert proc.returncode == 2 and "chrome_trace" in proc.stderr and not again.exists()


@pytest.mark.mpi
def test_real_run_trains(tmp_path):
    out = tmp_path / "r.h5"
    proc = run_mpi(2, ["-m", "hpcbench.pipeline", "jobs/configs/pipeline-quick.yaml", *SMALL,
                       "--allocators", "[adaptive]", "--adaptive.every", "1", "--output", str(out)], timeout=240)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    it = read_table(out, "iterations")
    assert np.all(np.isfinite(it["loss"]))
    assert len(set(it["layers_per_stage"])) > 1     # adaptive moved the boundaries (and the layers) at run time


@pytest.mark.parametrize("args,needle", [
    (["--schedule", "zigzag"], "zigzag"),
    (["--devices.speed", "fast"], "devices.speed"),
    (["--micro_batches", "3"], "micro_batches"),
    (["--devices.mem_cap_mb", "0.001"], "memory caps"),
    (["--chrome_trace", "''"], "chrome_trace"),
    (["--allocators", "[{name: sky-milp, solver: gurobi}]"], "unknown MILP solver 'gurobi'"),
    (["--allocators", "[{name: optimal, time_limit_s: 60}]"], "allocators.0.optimal.time_limit_s"),
    (["--allocators", "[evn]"], "unknown allocator 'evn'; registered: even,"),
    (["--milp_solver", "highs"], "unrecognized arguments: --milp_solver"),
])
def test_bad_input_exits_2_without_output(tmp_path, args, needle):
    out = tmp_path / "bad.h5"
    chosen = [] if "--allocators" in args else ["--allocators", "[optimal]"]
    proc = run_mpi(2, ["-m", "hpcbench.pipeline", "jobs/configs/pipeline-quick.yaml", *SMALL, *args,
                       *chosen, "--output", str(out)], timeout=120)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert needle in proc.stderr
    assert "Traceback" not in proc.stderr
    assert not out.exists()


def test_plot_pipeline_rejects_missing_and_foreign_files(tmp_path):
    import subprocess
    import sys

    from hpcbench.results import ResultsFile
    from mpitools import ROOT

    other = tmp_path / "other.h5"
    ResultsFile(other, "fl", {}).close()
    for path, needle in ((tmp_path / "missing.h5", "no such file"), (other, "expected 'pipeline'")):
        proc = subprocess.run([sys.executable, "analysis/plot_pipeline.py", str(path), "-o", str(tmp_path / "x.png")],
                              capture_output=True, text=True, cwd=str(ROOT), timeout=120)
        assert proc.returncode == 2 and needle in proc.stderr, proc.stderr

"""``python -m hpcbench.pipeline.bench`` writes every allocator's run and the MILP's status to HDF5;
``analysis/plot_allocation.py`` draws it."""

from __future__ import annotations

import subprocess
import sys

import numpy as np

from mpitools import ROOT

from hpcbench.results import read_attrs, read_table


def _bench(*args, timeout=300):
    return subprocess.run([sys.executable, "-m", "hpcbench.pipeline.bench", *args], capture_output=True, text=True,
                          timeout=timeout, cwd=str(ROOT), stdin=subprocess.DEVNULL)


def test_bench_records_milp_status_per_solver_and_plot_reads_it(tmp_path):
    out = tmp_path / "alloc.h5"
    proc = _bench("--sizes", "8x2,10x3", "--time-limit", "20", "--gap-rel", "0", "--output", str(out))
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert read_attrs(out)["kind"] == "allocation" and read_attrs(out)["status"] == "completed"
    t = read_table(out, "solves")
    assert len(t["layers"]) == 2 * 8           # even, sky-dynamic, optimal x2, sky-milp x (2 orders x 2 solvers)
    milp = np.asarray(t["allocator"]).astype(str) == "sky-milp"
    assert sorted(set(np.asarray(t["solver"])[milp])) == ["cbc", "highs"]
    assert all(s == "optimal" for s in np.asarray(t["status"])[milp])
    fixed = milp & (np.asarray(t["order"]).astype(str) == "fixed")
    np.testing.assert_allclose(t["objective_s"][fixed], t["reference_s"][fixed], rtol=1e-6)
    assert np.all(t["nodes"][milp] >= 0) and np.all(t["gap"][milp] <= 1e-6)
    assert "sky-milp fixed highs [optimal, gap 0.0%]" in proc.stdout
    png = tmp_path / "alloc.png"
    plot = subprocess.run([sys.executable, "analysis/plot_allocation.py", str(out), "-o", str(png)],
                          capture_output=True, text=True, timeout=120, cwd=str(ROOT))
    assert plot.returncode == 0, plot.stderr[-3000:]
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and "objective = optimal's bottleneck" in plot.stdout


def test_bench_bad_input_exits_2_without_a_file(tmp_path):
    out = tmp_path / "alloc.h5"
    for args, message in [(["--solvers", "gurobi"], "solvers: unknown 'gurobi'; choose from cbc, highs"),
                          (["--sizes", "3x4"], "sizes: need layers >= 4"),
                          (["--time-limit", "0"], "time-limit: must be > 0")]:
        proc = _bench(*args, "--output", str(out))
        assert proc.returncode == 2 and message in proc.stderr, proc.stderr[-2000:]
        assert not out.exists()

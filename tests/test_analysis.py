"""analysis/ scripts read HDF5 only (never MPI) and draw the figures of the README's commands."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from mpitools import ROOT, run_mpi

#: the figure scripts (``analysis/_NAME.py`` are helpers they share, not scripts)
ANALYSIS = sorted(p for p in (ROOT / "analysis").glob("*.py") if not p.name.startswith("_"))

_PROBE = """
import os, runpy, sys
sys.argv = [sys.argv[1]] + sys.argv[2:]
sys.path.insert(0, os.path.dirname(os.path.abspath(sys.argv[0])))   # as 'python SCRIPT' does
try:
    runpy.run_path(sys.argv[0], run_name="__main__")
    code = 0
except SystemExit as exc:
    code = exc.code or 0
print("MPI_LOADED" if "mpi4py" in sys.modules else "NO_MPI")
sys.exit(code)
"""


def _run_script(script: Path, *args: str):
    return subprocess.run([sys.executable, "-c", _PROBE, str(script), *args], capture_output=True, text=True,
                          timeout=300, cwd=str(ROOT), stdin=subprocess.DEVNULL)


@pytest.fixture(scope="module")
def fl_results(tmp_path_factory):
    out = tmp_path_factory.mktemp("fl") / "digits.h5"
    proc = run_mpi(2, ["-m", "hpcbench.fl", "jobs/configs/digits.yaml", "--rounds", "6", "--eval_interval", "2",
                       "--progress", "false", "--output", str(out)], timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return out


@pytest.mark.mpi
def test_plot_tta_draws_the_readme_figure(fl_results, tmp_path):
    png = tmp_path / "tta.png"
    proc = _run_script(ROOT / "analysis" / "plot_tta.py", str(fl_results), "-o", str(png))
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert png.is_file() and png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 10_000
    assert "best accuracy" in proc.stdout and "NO_MPI" in proc.stdout


@pytest.mark.parametrize("script", ANALYSIS, ids=lambda p: p.name)
def test_every_analysis_script_has_help_and_no_mpi(script):
    proc = _run_script(script, "--help")
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "usage:" in proc.stdout and "NO_MPI" in proc.stdout


def test_plot_tta_rejects_missing_and_foreign_files(tmp_path):
    from hpcbench.results import ResultsFile

    other = tmp_path / "other.h5"
    ResultsFile(other, "collectives", {}).close()
    for path, needle in ((tmp_path / "missing.h5", "no such file"), (other, "expected 'fl'")):
        proc = _run_script(ROOT / "analysis" / "plot_tta.py", str(path), "-o", str(tmp_path / "x.png"))
        assert proc.returncode == 2 and needle in proc.stderr, proc.stderr
    assert not (tmp_path / "x.png").exists()


@pytest.mark.mpi
def test_fl_compare_groups_by_strategy(fl_results, tmp_path):
    png = tmp_path / "cmp.png"
    proc = _run_script(ROOT / "analysis" / "fl_compare.py", str(fl_results), "--by", "aggregator", "-o", str(png))
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert png.is_file() and "NO_MPI" in proc.stdout
    assert any(line.split()[:2] == ["fedavg", "1"] for line in proc.stdout.splitlines()), proc.stdout


def test_fl_compare_summary_by_hand():
    sys.path.insert(0, str(ROOT / "analysis"))
    from fl_compare import summarise

    def run(tta, seed):
        return {"tta_s": tta, "rta": 3 if tta == tta else -1, "seed": seed}

    nan = float("nan")
    rows = summarise({"random": [run(100.0, 1), run(300.0, 2), run(nan, 3)],
                      "oort": [run(50.0, 1), run(100.0, 2), run(nan, 3)], "never": [run(nan, 1)]}, "random")
    by = {r["name"]: r for r in rows}
    assert (by["random"]["runs"], by["random"]["reached"], by["random"]["mean_tta_s"]) == (3, 2, 200.0)
    assert by["oort"]["mean_tta_s"] == 75.0 and by["oort"]["speedup"] == pytest.approx(200 / 75)
    assert by["random"]["speedup"] == 1.0 and by["never"]["reached"] == 0 and by["never"]["speedup"] != 1.0


@pytest.mark.mpi
def test_fl_time_shares_redraws_the_recorded_client_times(fl_results, tmp_path):
    """The redrawn times must equal the recorded ones (exit 2 otherwise); shares sum to 1; PNG and PDF."""
    png, pdf = tmp_path / "shares.png", tmp_path / "shares.pdf"
    proc = _run_script(ROOT / "analysis" / "fl_time_shares.py", str(fl_results), "-o", str(png), "-o", str(pdf))
    assert proc.returncode == 0, proc.stderr[-3000:]
    row = next(re.split(r"\s{2,}", line.strip()) for line in proc.stdout.splitlines()
               if line.startswith("digits.h5"))
    shares = [float(v) for v in row[5:8]]
    assert sum(shares) == pytest.approx(1.0, abs=2e-3) and shares[0] > 0.99  # ResNet-50's latency dwarfs 19 kB
    assert row[8:10] == ["19240", "19240"]
    assert png.read_bytes()[:4] == b"\x89PNG" and pdf.read_bytes()[:4] == b"%PDF"
    assert "nan" not in proc.stdout
    assert "up none, down none, compute trace" in proc.stdout
    assert "NO_MPI" in proc.stdout  # the clock is redrawn without starting MPI


def test_fl_compare_strategy_names_and_seed_band_by_hand():
    sys.path.insert(0, str(ROOT / "analysis"))
    from fl_compare import seed_band, strategy_name

    sync = {"mode": "sync", "selection": {"name": "oort"}, "aggregator": {"name": "fedyogi"}, "job_name": "a-s12"}
    assert strategy_name(sync, "selection") == "oort" and strategy_name(sync, "aggregator") == "fedyogi"
    assert strategy_name(dict(sync, mode="async", aggregator={"name": "fedavg"}), "aggregator") == "fedbuff"
    assert strategy_name(dict(sync, mode="async"), "aggregator") == "fedbuff+fedyogi"
    assert strategy_name(sync, "job") == "a" and strategy_name(dict(sync, job_name="fedbuff-k10-eta1-s3"),
                                                                 "job") == "fedbuff-k10-eta1"
    with pytest.raises(ValueError, match="aggregator.name"):
        strategy_name({"aggregator": {}}, "aggregator")
    runs = [{"hours": np.array([0.0, 1.0, 2.0]), "accuracy": np.array([0.1, 0.5, 0.9])},
            {"hours": np.array([0.5, 1.5]), "accuracy": np.array([0.2, 0.6])}]
    hours, mean, low, high = seed_band(runs, points=5)  # grid 0.5 .. 1.5: latest first to earliest last
    np.testing.assert_allclose(hours, [0.5, 0.75, 1.0, 1.25, 1.5])
    np.testing.assert_allclose(low, [0.1, 0.1, 0.2, 0.2, 0.5])
    np.testing.assert_allclose(high, [0.2, 0.2, 0.5, 0.5, 0.6])
    np.testing.assert_allclose(mean, [0.15, 0.15, 0.35, 0.35, 0.55])


def test_stellatrain_tta_seeds_ratios_by_hand():
    """The sweep's best fixed rate is the least median time over the seeds; ratios are per seed, same seed."""
    sys.path.insert(0, str(ROOT / "analysis"))
    from stellatrain_tta_seeds import best_fixed, report

    inf = float("inf")
    tta = {"ddp": {0: 3.0, 1: 3.0, 2: 3.0}, "topk-0.1": {0: 2.0, 1: 1.0, 2: 4.0},
           "topk-0.01": {0: 1.5, 1: 2.5, 2: 1.8}, "thresholdv-0.01": {0: 1.0, 1: inf, 2: 2.0},
           "controller": {0: 1.0, 1: 1.0, 2: 2.0}}
    final = {k: {s: 0.9 for s in range(3)} for k in tta}
    assert best_fixed(tta, final, [0, 1, 2]) == "topk-0.01"          # medians 2.0 against 1.8
    lines = report(tta, final, 0.85, 1.3)
    by = {line.split(":")[0]: line for line in lines}
    assert by["best fixed rate (topk-0.01, the sweep's) / controller"].endswith(
        "1.50 2.50 0.90; median 1.50x, range 0.90-2.50  (target >= 1.3x: reached)")
    assert "1.50 1.00 0.90; median 1.00x" in by["best fixed rate of each seed / controller"]
    assert "1.00 1.00 0.90; median 1.00x" in by["fastest other run of each seed / controller"]
    assert "1.00 inf 1.00; median 1.00x, range 1.00-inf" in by["thresholdv-0.01 / controller"]
    with pytest.raises(KeyError, match="topk-R"):
        best_fixed({"ddp": tta["ddp"]}, final, [0, 1, 2])

"""The cost-model benchmark runner under mpiexec -n 2 (tiny sweep) and its input errors."""

from __future__ import annotations

import h5py
import pytest

from mpitools import run_mpi


@pytest.mark.mpi
def test_costmodel_bench_two_ranks(tmp_path):
    out = tmp_path / "cm.h5"
    proc = run_mpi(2, ["-m", "hpcbench.bench.costmodel", "--links", "1Gbit", "--alphas", "1e-4",
                       "--sizes-mb", "0.5", "--algorithms", "ring,star,auto", "--reps", "1",
                       "--dilation", "2", "--gamma", "0", "--output", str(out)], timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.count("# hpcbench costmodel") == 1            # rank 0 prints
    with h5py.File(out) as f:
        assert f.attrs["kind"] == "costmodel" and f.attrs["status"] == "completed"
        t = f["results"]
        assert t.attrs["rows"] == 3
        assert t["measured"].attrs["units"] == "s"
        pred = t["predicted"][:]
        # modelled wire time is a floor: 2 ranks, 500 kB at 1 Gbit/s, ring 2 (alpha + 2 ms)
        assert pred[0] == pytest.approx(2 * (1e-4 + 250_000 * 8e-9))
        assert all(m >= 0.9 * p for m, p in zip(t["measured"][:], pred))
        assert all(r > 0 for r in t["ratio"][:])


@pytest.mark.mpi
@pytest.mark.parametrize("args", [["--links", "fast"], ["--algorithms", "nope"],
                                  ["--dilation", "0.5"], ["--sizes-mb", "-1"]])
def test_costmodel_bench_bad_input_exits_2(tmp_path, args):
    out = tmp_path / "x.h5"
    proc = run_mpi(2, ["-m", "hpcbench.bench.costmodel", *args, "--output", str(out)], timeout=60)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert not out.exists()

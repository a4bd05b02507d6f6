"""The compression bench CLI under mpiexec -n 2 (tiny config) and its argument errors."""

import json

import h5py
import pytest

from mpitools import run_mpi
from hpcbench.collectives.compress_bench import main


@pytest.mark.mpi
def test_bench_cli_two_ranks(tmp_path):
    trace = tmp_path / "trace.json"
    trace.write_text(json.dumps([{"id": "x", "tcp_speed_kbps": [80000.0, 40000.0]}]))
    out = tmp_path / "c.h5"
    proc = run_mpi(2, ["-m", "hpcbench.collectives.compress_bench", "--compressors",
                       "none,topk,thresholdv,qsgd,powersgd", "--sizes-mb", "0.05", "--repeats", "1",
                       "--warmup", "1", "--trace", str(trace), "--trace-scale", "10",
                       "--convergence", "--steps", "5", "--out", str(out)], timeout=240)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.count("# hpcbench compress") == 1   # only rank 0 prints
    with h5py.File(out) as f:
        assert f.attrs["kind"] == "compress" and f.attrs["status"] == "completed"
        assert f["allreduce"].attrs["rows"] == 5
        assert f["allreduce/time"].attrs["units"] == "s"
        assert f["convergence"].attrs["rows"] == 5


@pytest.mark.parametrize("args", [["--ratio", "0"], ["--ratio", "1.5"], ["--compressors", "nope"],
                                  ["--link", "fast"], ["--sizes-mb", "-1"], ["--alpha", "-1"]])
def test_bad_arguments_exit_2_no_file(tmp_path, args):
    out = tmp_path / "x.h5"
    with pytest.raises(SystemExit) as exc:
        main(args + ["--out", str(out)])
    assert exc.value.code == 2
    assert not out.exists()

"""The compression bench CLI under mpiexec -n 2 (tiny config) and its argument errors."""

from pathlib import Path

import h5py
import pytest

import hpcbench
from hpcbench.traces import MOBIPERF_FILE
from mpitools import run_mpi
from hpcbench.bench.compress.job import CompressJob
from hpcbench.lifecycle import run


@pytest.mark.mpi
def test_bench_cli_two_ranks(tmp_path):
    # the bundled, gzip-compressed MobiPerf trace itself (row 0: 32-45 Mbit/s, x 20)
    trace = Path(hpcbench.__file__).parent / "data" / "traces" / MOBIPERF_FILE
    out = tmp_path / "c.h5"
    proc = run_mpi(2, ["-m", "hpcbench.collectives.compress_bench", "--compressors",
                       "none,topk,thresholdv,qsgd,powersgd", "--sizes-mb", "0.05", "--repeats", "1",
                       "--warmup", "1", "--trace", str(trace), "--trace-scale", "20",
                       "--outputs", "dense,sparse", "--convergence", "--steps", "5",
                       "--out", str(out)], timeout=240)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.count("# hpcbench compress") == 1   # only rank 0 prints
    assert proc.stdout.count("(dense ring)") == 1           # the baseline's own breakdown row
    with h5py.File(out) as f:
        assert f.attrs["kind"] == "compress" and f.attrs["status"] == "completed"
        # 5 dense-output rows + sparse-output rows of the two sparse compressors
        assert f["allreduce"].attrs["rows"] == 7
        assert f["allreduce/time"].attrs["units"] == "s"
        forms = [v.decode() if isinstance(v, bytes) else str(v) for v in f["allreduce/output"][:]]
        comps = [v.decode() if isinstance(v, bytes) else str(v) for v in f["allreduce/compressor"][:]]
        assert sorted(c for c, o in zip(comps, forms) if o == "sparse") == ["thresholdv", "topk"]
        for col in ("cpu", "encode", "encode_cpu", "decode", "decode_cpu", "wire", "dense_cpu"):
            assert f[f"allreduce/{col}"].attrs["units"] == "s"
        enc = f["allreduce/encode"][:]
        assert all(e > 0 for e, c in zip(enc, comps) if c == "topk")
        assert all(w > 0 for w in f["allreduce/wire"][:])
        assert proc.stdout.count("(torch.topk)") == 1           # the reference selection, same run
        assert f["local/vs_torch_topk"][:].min() > 0 and f["local"].attrs["rows"] == 4   # no powersgd row
        assert f["convergence"].attrs["rows"] == 5
        assert f["convergence/lr_scale"][:].min() > 0


@pytest.mark.parametrize("args", [["--ratio", "0"], ["--ratio", "1.5"], ["--compressors", "nope"],
                                  ["--link", "fast"], ["--sizes-mb", "-1"], ["--alpha", "-1"],
                                  ["--outputs", "coo"], ["--threads", "0"]])
def test_bad_arguments_exit_2_no_file(tmp_path, args):
    out = tmp_path / "x.h5"
    assert run(CompressJob, args + ["--out", str(out)]) == 2
    assert not out.exists()

"""The collectives benchmark CLI under mpiexec -n 2 (tiny sweep) and its argument errors.

With ``HPCBENCH_REQUIRE_HOROVOD=1`` (set by ``.ci/run``, which builds Horovod
first) the Horovod baseline must really run: a ``horovod`` row per size with
finite times and no wrong elements; a missing or broken Horovod fails. Without
it, a developer without Horovod passes on the benchmark's "not installed" line.
"""

from __future__ import annotations

import os

import numpy as np
import pytest

from mpitools import run_mpi

REQUIRE_HOROVOD = os.environ.get("HPCBENCH_REQUIRE_HOROVOD", "") not in ("", "0")


@pytest.mark.mpi
def test_bench_cli_tiny_sweep(tmp_path):
    from hpcbench.results import read_attrs, read_table

    out = tmp_path / "c.h5"
    proc = run_mpi(2, ["-m", "hpcbench.collectives.bench", "-b", "1K", "-e", "4K", "-f", "4",
                       "-n", "5", "-w", "1", "-a", "ring,auto,mpi,gloo,horovod",
                       "--output", str(out)], timeout=240)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    text = proc.stdout
    assert "time" in text and "busbw" in text and "(us)" in text and "(GB/s)" in text
    assert "# Check: OK" in text
    rows = read_table(out, "results")
    impls = set(rows["impl"])
    assert {"ring", "auto", "mpi"} <= impls
    import torch.distributed as dist
    if dist.is_available() and dist.is_gloo_available():   # gloo is built in: it must start
        assert "gloo" in impls, f"gloo is available in torch but did not run:\n{text}"
        gl = rows["impl"] == "gloo"
        assert sorted(rows["size"][gl]) == [1024, 4096] and (rows["time"][gl] > 0).all()
    else:
        assert "gloo:" in text
    if REQUIRE_HOROVOD:
        assert "horovod" in impls, f"HPCBENCH_REQUIRE_HOROVOD is set but no horovod rows:\n{text}"
        hv = rows["impl"] == "horovod"
        assert sorted(rows["size"][hv]) == [1024, 4096]
        assert np.all(np.isfinite(rows["time"][hv])) and np.all(rows["time"][hv] > 0)
        assert np.all(rows["busbw"][hv] > 0) and (rows["wrong"][hv] == 0).all()
    else:
        assert "horovod" in impls or "horovod: not installed" in text
    assert sorted(set(rows["size"])) == [1024, 4096]
    assert (rows["wrong"] == 0).all()
    attrs = read_attrs(out)
    assert attrs["kind"] == "collectives" and attrs["status"] == "completed"
    assert attrs["world_size"] == 2
    # only rank 0 prints the table
    assert text.count("# Check:") == 1


@pytest.mark.mpi
def test_bench_cli_nonblocking(tmp_path):
    """``--nonblocking``: the custom algorithms run as iallreduce(...).wait(), checked."""
    from hpcbench.results import read_attrs, read_table

    out = tmp_path / "nb.h5"
    proc = run_mpi(2, ["-m", "hpcbench.collectives.bench", "-b", "1K", "-e", "64K", "-f", "8",
                       "-n", "5", "-w", "1", "-a", "ring,auto,mpi", "--nonblocking",
                       "--output", str(out)], timeout=240)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "custom=nonblocking+wait" in proc.stdout and "# Check: OK" in proc.stdout
    rows = read_table(out, "results")
    assert set(rows["impl"]) == {"ring", "auto", "mpi"} and (rows["wrong"] == 0).all()
    assert read_attrs(out)["status"] == "completed"


@pytest.mark.skipif(not REQUIRE_HOROVOD, reason="HPCBENCH_REQUIRE_HOROVOD not set")
def test_horovod_required_and_importable():
    """Fail fast, with the import error, when CI requires Horovod and it does not import."""
    import horovod.torch as hvd
    assert hvd.mpi_built(), "horovod.torch was built without MPI"


@pytest.mark.parametrize("args", [["-b", "12X"], ["-f", "1"], ["-o", "alltoall"],
                                  ["-a", "bogus"], ["-b", "2M", "-e", "1K"], ["-d", "int8"],
                                  ["--rounds", "0"]])
def test_bench_cli_bad_values(tmp_path, args, capsys):
    from hpcbench.bench.collectives.job import CollectivesJob
    from hpcbench.lifecycle import run

    out = tmp_path / "x.h5"
    assert run(CollectivesJob, [*args, "--output", str(out)]) == 2
    assert not out.exists()
    assert "hpcbench collectives" in capsys.readouterr().err


def test_parse_size():
    from hpcbench.bench.collectives.job import parse_size
    assert parse_size("8") == 8 and parse_size("4K") == 4096 and parse_size("2M") == 2 << 20
    assert parse_size("1G") == 1 << 30


@pytest.mark.mpi
def test_bench_cli_link_and_overlap(tmp_path):
    from hpcbench.results import read_attrs, read_table

    out = tmp_path / "l.h5"
    proc = run_mpi(2, ["-m", "hpcbench.collectives.bench", "-b", "1K", "-e", "1K", "-n", "5",
                       "-w", "1", "-a", "mpi,auto,ring", "--link", "10Gbit", "--link-alpha",
                       "1e-5", "--output", str(out)], timeout=240)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "link=modelled 10 Gbit/s" in proc.stdout and "# Check: OK" in proc.stdout
    assert {"mpi", "auto", "ring"} <= set(read_table(out, "results")["impl"])
    out = tmp_path / "o.h5"
    proc = run_mpi(2, ["-m", "hpcbench.collectives.bench", "--overlap", "--link", "10Gbit",
                       "-b", "64K", "-e", "64K", "--output", str(out)], timeout=240)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    rows = read_table(out, "overlap")
    assert sorted(set(rows["transport"])) == ["link", "shm"]
    assert (rows["reps"] == 9).all() and (rows["t_comm"] > 0).all()
    assert (rows["hidden_q1"] <= rows["hidden"]).all()
    assert (rows["hidden"] <= rows["hidden_q3"]).all()
    assert ((rows["cpu_share"] > 0) & (rows["cpu_share"] <= 1.01)).all()
    assert "mean hidden (link)" in proc.stdout and "mean hidden (shm)" in proc.stdout
    attrs = read_attrs(out)
    assert "mean_hidden_link" in attrs and "mean_hidden_shm" in attrs


@pytest.mark.parametrize("args", [["--link", "fast"], ["--link", "1Gbit", "--link-alpha", "-1"],
                                  ["--overlap-factor", "0"], ["--overlap-reps", "0"]])
def test_bench_cli_bad_link(tmp_path, args):
    from hpcbench.bench.collectives.job import CollectivesJob
    from hpcbench.lifecycle import run

    assert run(CollectivesJob, [*args, "--output", str(tmp_path / "x.h5")]) == 2
    assert not (tmp_path / "x.h5").exists()


@pytest.mark.mpi
def test_bench_cli_existing_output_and_bad_flag_two_ranks(tmp_path):
    """Under mpiexec -n 2: an existing --output is refused (kept intact) unless --overwrite, and a
    bad flag exits 2 with one message (rank 0's) and no file."""
    out = tmp_path / "c.h5"
    out.write_bytes(b"old results")
    tiny = ["-m", "hpcbench.collectives.bench", "-b", "1K", "-e", "1K", "-n", "5", "-w", "1",
            "-a", "mpi,ring", "--output", str(out)]
    proc = run_mpi(2, tiny, timeout=120)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "exists" in proc.stderr and out.read_bytes() == b"old results"
    proc = run_mpi(2, [*tiny, "--overwrite"], timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    from hpcbench.results import read_attrs
    assert read_attrs(out)["status"] == "completed"
    bad = tmp_path / "bad.h5"
    proc = run_mpi(2, ["-m", "hpcbench.collectives.bench", "-f", "1", "--output", str(bad)], timeout=120)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert proc.stderr.count("stepfactor") == 1 and not bad.exists()


def test_reference_of_each_op():
    """Allgather's reference holds each rank's count // n inputs (it once held n * count)."""
    from hpcbench.bench.collectives.reference import pattern, reference

    n, count = 3, 12
    got = reference(n, count, "sum", "float32", "allgather", 1)
    np.testing.assert_array_equal(got, np.concatenate([pattern(r, 4) for r in range(n)]))
    total = sum(pattern(r, count) for r in range(n))
    np.testing.assert_array_equal(reference(n, count, "sum", "float32", "reduce_scatter", 2), total[8:12])
    np.testing.assert_array_equal(reference(n, count, "avg", "int64", "allreduce", 0), total // n)
    np.testing.assert_array_equal(reference(n, count, "max", "float32", "bcast", 2), pattern(0, count))


@pytest.mark.parametrize("op", ["allreduce", "reduce_scatter", "allgather", "bcast"])
def test_every_backend_runs_each_op_at_size_1(op):
    """The backend registry: MPI and every custom algorithm give the reference on COMM_SELF."""
    from mpi4py import MPI

    from hpcbench.bench.collectives.backends import BASELINES, Custom, custom_algorithms, make_buffers
    from hpcbench.bench.collectives.reference import count_wrong, reference

    comm = MPI.COMM_SELF
    for impl in ["mpi", *custom_algorithms(op)]:
        backend = BASELINES[impl]() if impl in BASELINES else Custom(impl)
        assert backend.start(comm, "float64") is None
        for redop in ("sum", "avg", "max"):
            b = make_buffers(op, "float64", redop, 40, comm, backend.torch_buffers)
            backend.runner(op, b, comm)()
            res = b.x if op == "bcast" else b.out
            assert count_wrong(res, reference(1, 40, redop, "float64", op, 0), "float64") == 0, (impl, redop)


@pytest.mark.mpi
def test_bench_cli_allgather_two_ranks(tmp_path):
    out = tmp_path / "ag.h5"
    proc = run_mpi(2, ["-m", "hpcbench.collectives.bench", "-o", "allgather", "-b", "1K", "-e", "1K",
                       "-n", "5", "-w", "1", "-a", "mpi,ring", "--output", str(out)], timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "# Check: OK (0 wrong elements)" in proc.stdout

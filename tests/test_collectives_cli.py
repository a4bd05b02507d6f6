"""The collectives benchmark CLI under mpiexec -n 2 (tiny sweep) and its argument errors."""

from __future__ import annotations

import pytest

from mpitools import run_mpi


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
    assert "gloo" in impls or "gloo:" in text
    assert "horovod" in impls or "horovod: not installed" in text
    assert sorted(set(rows["size"])) == [1024, 4096]
    assert (rows["wrong"] == 0).all()
    attrs = read_attrs(out)
    assert attrs["kind"] == "collectives" and attrs["status"] == "completed"
    assert attrs["world_size"] == 2
    # only rank 0 prints the table
    assert text.count("# Check:") == 1


@pytest.mark.parametrize("args", [["-b", "12X"], ["-f", "1"], ["-o", "alltoall"],
                                  ["-a", "bogus"], ["-b", "2M", "-e", "1K"], ["-d", "int8"]])
def test_bench_cli_bad_values(tmp_path, args, capsys):
    from hpcbench.collectives.bench import main

    out = tmp_path / "x.h5"
    with pytest.raises(SystemExit) as exc:
        main([*args, "--output", str(out)])
    assert exc.value.code == 2
    assert not out.exists()


def test_parse_size():
    from hpcbench.collectives.bench import parse_size
    assert parse_size("8") == 8 and parse_size("4K") == 4096 and parse_size("2M") == 2 << 20
    assert parse_size("1G") == 1 << 30

"""``hpcbench reproduce``'s arguments, its manifest and Ctrl-C (issue 35 part 6).

docs/architecture.md, "Data-safety guarantees": a bad manifest or ``--out`` is exit 2 with one line
and no traceback (input bounds: the manifest is a bounded regular UTF-8 file; every number in it is
finite); Ctrl-C ends the running job's process group, writes its ledger line and the report of what
was done, and exits 130 without a traceback.
"""

from __future__ import annotations

import errno
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from hpcbench.reproduce.command import main
from mpitools import ROOT, mpiexec_path

CLAIM = "{name: c, mirrors: x, quantity: \"max(slow.results.measured)\", op: \">\", threshold: %s}"

MANIFEST = """
version: 1
figures:
  tiny:
    title: fixture
    paper: a fixture
    jobs:
      - id: slow
        runner: costmodel
        ranks: 2
        overrides: {links: 1Mbit, alphas: 0, sizes-mb: "1", algorithms: ring, reps: 200, gamma: 0}
        expected_s: 1600
    analysis: {script: analysis/plot_costmodel.py}
    claims:
      - %s
""".strip("\n")


def _manifest(tmp_path, threshold="0") -> Path:
    path = tmp_path / "m.yaml"
    path.write_text(MANIFEST % (CLAIM % threshold))
    return path


def _one_line_error(capsys, rc, needle):
    err = capsys.readouterr().err
    assert rc == 2, err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and needle in lines[0] and "Traceback" not in err, err


def test_binary_manifest_is_one_line(tmp_path, capsys):
    path = tmp_path / "bin.yaml"
    path.write_bytes(bytes(range(256)) * 4)
    _one_line_error(capsys, main(["--manifest", str(path), "--list"]), "not UTF-8 text")


@pytest.mark.parametrize("threshold", [".nan", ".inf", "[0, .nan]"])
def test_non_finite_claim_threshold_is_refused_by_validation(tmp_path, capsys, threshold):
    rc = main(["--manifest", str(_manifest(tmp_path, threshold)), "--list"])
    err = capsys.readouterr().err
    assert rc == 2 and "threshold" in err and "Traceback" not in err, err


def test_manifest_device_and_fifo_are_refused(tmp_path, capsys):
    _one_line_error(capsys, main(["--manifest", "/dev/zero", "--list"]), "character device")
    fifo = tmp_path / "m.fifo"
    os.mkfifo(fifo)
    _one_line_error(capsys, main(["--manifest", str(fifo), "--list"]), "FIFO")


def test_out_naming_a_file_is_one_line(tmp_path, capsys):
    out = tmp_path / "notes.txt"
    out.write_text("mine")
    _one_line_error(capsys, main(["--manifest", str(_manifest(tmp_path)), "--out", str(out)]),
                    "--out: " + repr(str(out)) + " is a file, not a folder")
    assert out.read_text() == "mine"


@pytest.mark.parametrize("out", ["/sys/kernel", "/sys/hpcbench-nope/out", "/proc"])
def test_out_that_cannot_be_written_is_one_line(tmp_path, capsys, out):
    """Virtual file systems refuse new files even to root (permissions alone would not tell)."""
    _one_line_error(capsys, main(["--manifest", str(_manifest(tmp_path)), "--out", out]), "--out: cannot write in")


def test_out_on_a_read_only_file_system_is_one_line(tmp_path, capsys, monkeypatch):
    import tempfile

    def read_only(*a, **k):
        raise OSError(errno.EROFS, os.strerror(errno.EROFS))

    monkeypatch.setattr(tempfile, "mkstemp", read_only)
    out = tmp_path / "new"
    _one_line_error(capsys, main(["--manifest", str(_manifest(tmp_path)), "--out", str(out)]),
                    "Read-only file system")
    assert not out.exists()                 # the folder it made for the check is gone again


@pytest.mark.mpi
def test_ctrl_c_ends_the_run_writes_ledger_and_report_and_exits_130(tmp_path):
    mpiexec_path()
    out = tmp_path / "out"
    proc = subprocess.Popen([sys.executable, "-m", "hpcbench.cli", "reproduce", "--manifest",
                             str(_manifest(tmp_path)), "--out", str(out)], cwd=str(ROOT), stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True,
                            # a suite started in the background inherits SIGINT ignored (a non-interactive shell's
                            # `cmd &`), and Python then installs no Ctrl-C handler: give the child a terminal's default
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    log = None
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:            # wait until the job runs (its log says so)
        logs = list(out.rglob("*.log"))
        if logs and "hpcbench costmodel" in logs[0].read_text(errors="replace"):
            log = logs[0]
            break
        time.sleep(0.5)
    assert log is not None, "the run did not start"
    os.killpg(proc.pid, signal.SIGINT)            # what a terminal's Ctrl-C does
    stdout, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 130, stderr
    assert "Traceback" not in stderr and "Traceback" not in stdout
    entries = [json.loads(line) for line in (out / "ledger.jsonl").read_text().splitlines()]
    assert [e["rc"] for e in entries if e["kind"] == "run"] == [130]
    assert "interrupted" in entries[0]["note"]
    assert (out / "report.html").is_file() and "interrupted" in stdout
    ps = subprocess.run(["pgrep", "-f", f"hpcbench.*{out}"], capture_output=True, text=True)
    assert ps.stdout.strip() == "", "a process of the interrupted run is still alive"

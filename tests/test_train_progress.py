"""``hpcbench train`` draws its progress through ``runtime/progress.progress_bar`` (issue 35 part 8).

A bar on a terminal; elsewhere (a Slurm ``.out`` file, a pipe) plain lines and no carriage-return
redraws (docs/architecture.md, "Data-safety guarantees": a log file holds lines, not redraws).
"""

from __future__ import annotations

import io
import sys

import pytest

from hpcbench.runtime.progress import LineProgress
from hpcbench.train.steps.hooks import Progress
from mpitools import ROOT, run_mpi


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def _drive(monkeypatch, stream, total):
    out = io.StringIO()
    monkeypatch.setattr(sys, "stderr", stream)
    monkeypatch.setattr(sys, "stdout", out)
    p = Progress(total, True)
    p.bar.reset(total=20)                   # as the job does once its runs are planned
    for i in range(20):
        p.after_step(None, None)
        if i == 9:
            p.write("epoch 1 done")
    p.close()
    return p, out.getvalue()


@pytest.mark.parametrize("total", [None, 20])
def test_a_log_file_gets_lines_not_redraws(monkeypatch, total):
    err = io.StringIO()
    p, out = _drive(monkeypatch, err, total)
    assert isinstance(p.bar, LineProgress)
    assert "\r" not in err.getvalue() and "\r" not in out and out == "epoch 1 done\n"
    assert err.getvalue().splitlines()[-1].startswith("20/20 steps (100 %)")


def test_a_terminal_gets_the_bar(monkeypatch):
    tty = _Terminal()
    p, out = _drive(monkeypatch, tty, 20)
    assert not isinstance(p.bar, LineProgress) and "\r" in tty.getvalue() and "epoch 1 done" in out


@pytest.mark.mpi
def test_train_log_has_no_carriage_returns(tmp_path):
    """The issue's check: ``mpiexec -n 2 python -m hpcbench.train train-stellatrain-quick.yaml > log 2>&1``."""
    out = tmp_path / "st.h5"
    proc = run_mpi(2, ["-m", "hpcbench.train", str(ROOT / "jobs" / "configs" / "train-stellatrain-quick.yaml"),
                       "--output", str(out)], timeout=400)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "\r" not in proc.stdout and "\r" not in proc.stderr

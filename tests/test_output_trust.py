"""Printed output a user can trust: no nan, aligned tables, lines instead of bars off a terminal,
the oversubscription warning, and the package launcher ending a job's whole process group."""

from __future__ import annotations

import io
import math
import sys
import types

import psutil
import pytest

from hpcbench.runtime import launch
from hpcbench.runtime.hosts import oversubscription
from hpcbench.runtime.progress import LineProgress, progress_bar
from hpcbench.runtime.texttable import NA, fmt, render


def test_tables_align_with_their_headers_and_never_print_nan():
    lines = render(("name", "value", "why"), [("ring", 1.5, math.nan), ("a-much-longer-name", float("nan"),
                                                                          NA("no link model"))],
                   units=("", "(s)", ""), formats=("s", ".2f", ".1f"))
    assert lines[0].index("value") + len("value") == lines[2].index("1.50") + len("1.50")   # numbers right-aligned
    assert lines[1].strip() == "(s)" and all("nan" not in line for line in lines)
    assert lines[3].split()[1] == "n/a" and lines[3].endswith("n/a (no link model)")
    assert fmt(float("nan"), ".3f", NA("target not reached")) == "n/a (target not reached)"
    assert fmt(True) == "true" and fmt(3, "d") == "3" and fmt("text", ".2f") == "text"


def test_no_carriage_return_bar_when_the_stream_is_not_a_terminal():
    stream = io.StringIO()
    bar = progress_bar(50, "job", "round", stream)
    assert isinstance(bar, LineProgress)
    for _ in range(50):
        bar.update(1)
        bar.set_postfix(acc="0.9")
    bar.close()
    text = stream.getvalue()
    assert "\r" not in text and len(text.splitlines()) == 10          # one line every 10 %
    assert text.splitlines()[-1].startswith("job: 50/50 rounds (100 %)") and "acc=0.9" in text


def test_a_resumed_loop_counts_from_where_it_was():
    stream = io.StringIO()
    bar = LineProgress(100, "", "step", stream, initial=55, every_pct=20)
    for _ in range(45):
        bar.update()
    assert [line.split()[0] for line in stream.getvalue().splitlines()] == ["60/100", "80/100", "100/100"]


def test_oversubscribed_hosts_are_named():
    assert oversubscription(["a", "a", "a", "b"], [2, 2, 2, 4]) == "a: 3 ranks on 2 cores"
    assert oversubscription(["a", "a"], [2, 2]) == ""


def test_compute_real_warns_once_and_records_it(capsys):
    from hpcbench.lifecycle.driver import _oversubscribed

    job = types.SimpleNamespace(prog="hpcbench train")
    text = _oversubscribed(job, ["n", "n", "n"], [2, 2, 2], "real")
    assert text == "n: 3 ranks on 2 cores"
    err = capsys.readouterr().err
    assert err.count("warning") == 1 and "compute: emulated" in err and "time-slicing" in err
    assert _oversubscribed(job, ["n", "n", "n"], [2, 2, 2], "emulated") == text
    assert capsys.readouterr().err == ""


def test_the_launcher_ends_the_whole_job_at_its_time_limit():
    try:
        launch.find_mpiexec()
    except FileNotFoundError:
        pytest.skip("no mpiexec")
    # the raise is the limit at work (the command would have ended by itself, exit 0, after 60 s); that the whole
    # job ended is checked by its processes, not by a bound on wall time
    with pytest.raises(launch.LaunchTimeout) as info:
        launch.run_mpi(2, ["-c", "import os, time; print('started', os.getpid(), flush=True); time.sleep(60)"],
                       timeout=4)
    pids = [int(line.split()[1]) for line in info.value.stdout.splitlines() if line.startswith("started")]
    assert len(pids) == 2, info.value.stdout
    ranks = []
    for pid in pids:
        try:
            ranks.append(psutil.Process(pid))
        except psutil.NoSuchProcess:
            pass
    _, alive = psutil.wait_procs(ranks, timeout=60)      # signalled already: a hang guard, not a speed bound
    assert not [p for p in alive if p.status() != psutil.STATUS_ZOMBIE], alive
    proc = launch.run_mpi(1, ["-c", "import sys; sys.exit(3)"], timeout=60)
    assert proc.returncode == 3 and proc.args[0] == launch.find_mpiexec() and proc.args[3] == sys.executable

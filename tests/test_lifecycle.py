"""The shared job lifecycle (hpcbench.lifecycle) under real ``mpiexec`` launches.

Fault injection: ``--fault-inject RANK:STEP:MODE`` makes one rank fail at one
round; the whole job must end within 10 s of the fault with status 1 (an
exception), 2 (an input error) or the launcher's status for a rank that
vanished, under ``mpiexec`` and ``mpiexec ... python -m mpi4py``; and the
results file must say so, whichever rank failed: ``failed`` when the failing
rank could tell rank 0, ``interrupted`` (the heartbeat) when it vanished
(docs/architecture.md, "Data-safety guarantees").
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from mpitools import ROOT, mpiexec_path, run_mpi

CONFIG = "jobs/configs/digits.yaml"
FAST = ["--rounds", "400", "--eval_interval", "50", "--progress", "false"]


def _launch_timed(n: int, args: list[str], marker: str, timeout: float = 240.0, mpi4py: bool = False):
    """Run the job; return (returncode, stderr, seconds from ``marker`` on stderr to the job's end, seconds from
    the launch to ``marker``).

    The last two are measured in the same run, on the same loaded or idle machine: a fault ends the job fast when
    the first is the smaller (ending takes less than starting the job and reaching the fault did).
    """
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONUNBUFFERED="1")
    runner = ["-m", "mpi4py"] if mpi4py else []
    cmd = [mpiexec_path(), "-n", str(n), sys.executable, *runner, "-m", "hpcbench.fl", *args]
    launched = time.monotonic()
    proc = subprocess.Popen(cmd, cwd=str(ROOT), env=env, stdin=subprocess.DEVNULL,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    lines: list[str] = []
    seen_at: list[float] = []

    def read():
        for line in proc.stderr:
            lines.append(line)
            if not seen_at and marker in line:
                seen_at.append(time.monotonic())

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
        raise AssertionError("job hung:\n" + "".join(lines)[-4000:]) from None
    ended = time.monotonic()
    reader.join(timeout=10)
    err = "".join(lines)
    assert seen_at, f"fault marker {marker!r} never printed (rc={proc.returncode}):\n{err[-4000:]}"
    return proc.returncode, err, ended - seen_at[0], seen_at[0] - launched


def _file_state(out: Path):
    from hpcbench.results.status import file_status
    from mpitools import wait_unlocked

    wait_unlocked(out)
    return file_status(out)


@pytest.mark.mpi
@pytest.mark.parametrize("n, rank, mode", [
    (2, 0, "raise"),   # the aggregator raises
    (2, 1, "raise"),   # an executor raises
    (4, 0, "input"),   # an input error found mid-run keeps status 2
    (4, 1, "raise"),   # at -n 4, a fault on each rank: 0, 1, 2, 3
    (4, 2, "input"),
    (4, 3, "raise"),
    (4, 2, "exit"),    # an executor vanishes (os._exit): no handler runs
])
def test_fault_ends_every_rank_fast_and_marks_the_file(tmp_path, n, rank, mode):
    out = tmp_path / "fault.h5"
    rc, err, after, before = _launch_timed(n, [CONFIG, *FAST, "--output", str(out), "--fault-inject",
                                               f"{rank}:3:{mode}"], marker="fault injected")
    assert after < before, f"job took {after:.1f} s to end after the fault, {before:.1f} s to reach it:\n" \
                           f"{err[-3000:]}"
    state = _file_state(out)
    if mode == "raise":
        assert rc == 1, (rc, err[-3000:])
        assert err.count("error: RuntimeError: fault injected") == 1, err[-3000:]
    elif mode == "input":
        assert rc == 2, (rc, err[-3000:])
        assert "Traceback" not in err
    else:  # hydra ORs the wait statuses: the rank's own 1, or 9 (SIGKILL) of the ranks it killed
        assert rc in (1, 9), (rc, err[-3000:])
        assert state.state == "interrupted", state
        return
    assert state.state == "failed" and "fault injected" in state.detail, state
    if rank:  # told by the failing rank, before the abort
        assert state.detail.startswith(f"rank {rank}: "), state


def test_vanishing_rank_exits_with_the_failure_status(tmp_path):
    """MODE exit leaves with 1 (EXIT_FAILURE), as a launcher that reports the rank's own status shows it."""
    out = tmp_path / "x.h5"
    proc = subprocess.run([sys.executable, "-m", "hpcbench.fl", CONFIG, *FAST, "--output", str(out),
                           "--fault-inject", "0:1:exit"], cwd=str(ROOT), capture_output=True, text=True,
                          timeout=180, stdin=subprocess.DEVNULL)
    assert proc.returncode == 1, proc.stderr[-2000:]
    assert _file_state(out).state == "interrupted"


@pytest.mark.mpi
@pytest.mark.skipif(not os.path.isdir("/proc"), reason="needs /proc to find a rank's process")
def test_sigterm_of_one_rank_marks_the_file_failed(tmp_path):
    """SIGTERM to rank 2 alone (a node's scheduler, an operator): exit 1, the file says which rank stopped."""
    import signal

    out = tmp_path / "term.h5"
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONUNBUFFERED="1")
    cmd = [mpiexec_path(), "-n", "3", sys.executable, "-m", "hpcbench.fl", CONFIG, "--rounds", "100000",
           "--eval_interval", "1000", "--progress", "false", "--output", str(out)]
    proc = subprocess.Popen(cmd, cwd=str(ROOT), env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        pid = _rank_pid(proc.pid, 2, lambda: out.exists(), timeout=120)
        time.sleep(1.0)  # well inside the rounds
        os.kill(pid, signal.SIGTERM)
        _, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    assert proc.returncode == 1, err[-3000:]
    state = _file_state(out)
    assert state.state == "failed" and state.detail.startswith("rank 2: Terminated"), state


def _rank_pid(root: int, rank: int, ready, timeout: float) -> int:
    """The pid of MPI rank ``rank`` below process ``root`` (its PMI_RANK), once ``ready()``."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if ready():
            for entry in os.listdir("/proc"):
                if not entry.isdigit():
                    continue
                try:
                    with open(f"/proc/{entry}/environ", "rb") as fh:
                        env = fh.read().split(b"\0")
                    with open(f"/proc/{entry}/cmdline", "rb") as fh:
                        cmdline = fh.read()
                except OSError:
                    continue
                if b"hpcbench.fl" in cmdline and f"PMI_RANK={rank}".encode() in env and _below(int(entry), root):
                    return int(entry)
        time.sleep(0.2)
    raise AssertionError(f"rank {rank} never appeared")


def _below(pid: int, root: int) -> bool:
    while pid > 1:
        if pid == root:
            return True
        try:
            with open(f"/proc/{pid}/stat") as fh:
                pid = int(fh.read().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            return False
    return False


@pytest.mark.mpi
def test_fault_under_python_m_mpi4py(tmp_path):
    rc, err, after, before = _launch_timed(2, [CONFIG, *FAST, "--output", str(tmp_path / "x.h5"),
                                               "--fault-inject", "1:2:raise"], marker="fault injected", mpi4py=True)
    assert rc == 1 and after < before, (rc, after, before, err[-3000:])


@pytest.mark.mpi
def test_input_error_keeps_status_2_under_python_m_mpi4py(tmp_path):
    env = dict(os.environ, OMP_NUM_THREADS="1")
    proc = subprocess.run([mpiexec_path(), "-n", "2", sys.executable, "-m", "mpi4py", "-m", "hpcbench.fl",
                           CONFIG, "--rounds", "zero", "--output", str(tmp_path / "x.h5")],
                          cwd=str(ROOT), env=env, capture_output=True, text=True, timeout=180,
                          stdin=subprocess.DEVNULL)
    assert proc.returncode == 2, (proc.returncode, proc.stderr[-3000:])
    assert proc.stderr.count("'rounds'") == 1, proc.stderr


@pytest.mark.mpi
def test_usage_error_and_help_printed_once(tmp_path):
    proc = run_mpi(3, ["-m", "hpcbench.fl", CONFIG, "--rounds"], timeout=180)
    assert proc.returncode == 2, proc.stderr[-3000:]
    assert proc.stderr.count("usage:") == 1, proc.stderr
    assert "expected one argument" in proc.stderr
    proc = run_mpi(2, ["-m", "hpcbench.fl", "--help"], timeout=180)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.count("usage:") == 1, proc.stdout


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.mark.mpi
def test_existing_output_is_refused_unless_overwrite(tmp_path):
    out = tmp_path / "keep.h5"
    out.write_bytes(b"earlier results")
    before = _digest(out)
    proc = run_mpi(2, ["-m", "hpcbench.fl", CONFIG, "--rounds", "2", "--progress", "false",
                       "--output", str(out)], timeout=180)
    assert proc.returncode == 2, proc.stderr[-3000:]
    assert "exists" in proc.stderr and "--overwrite" in proc.stderr
    assert _digest(out) == before
    proc = run_mpi(2, ["-m", "hpcbench.fl", CONFIG, "--rounds", "2", "--progress", "false",
                       "--output", str(out), "--overwrite"], timeout=180)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert _digest(out) != before


@pytest.mark.mpi
@pytest.mark.parametrize("template", ["{bogus}.h5", "{job_name.h5", "{0}.h5", "   "])
def test_bad_output_template_exit_2(tmp_path, template):
    proc = run_mpi(2, ["-m", "hpcbench.fl", CONFIG, "--rounds", "2", "--progress", "false",
                       "--output", str(tmp_path / template) if template.strip() else template], timeout=180)
    assert proc.returncode == 2, proc.stderr[-3000:]
    assert "output" in proc.stderr and "Traceback" not in proc.stderr
    assert list(tmp_path.iterdir()) == []


# ------------------------------------------------------------------ in-process parts of the lifecycle
def test_format_output_path_names_the_key():
    from hpcbench.runtime.errors import InputError
    from hpcbench.runtime.output_names import format_output_path

    assert format_output_path("r/{job_name}.h5", {"job_name": "a"}) == Path("r/a.h5")
    for bad in ("{x}.h5", "{job_name.h5", "{0}.h5", "{job_name!z}.h5", ""):
        with pytest.raises(InputError, match="output"):
            format_output_path(bad, {"job_name": "a"})


def test_settings_flags_reach_environment_and_provenance(monkeypatch):
    import argparse

    from hpcbench.runtime import settings
    from hpcbench.runtime.errors import InputError

    for s in settings.SETTINGS:
        monkeypatch.setenv(s.env, "")       # recorded, so that what apply() sets is undone
        monkeypatch.delenv(s.env)
    parser = argparse.ArgumentParser()
    settings.add_arguments(parser)
    settings.apply(parser.parse_args(["--eager-bytes", "4000", "--jit", "off"]))
    snap = settings.snapshot()
    assert snap == {"setting_eager_bytes": "4000", "setting_progress_engine": "thread", "setting_jit": "off"}
    assert os.environ["HPCBENCH_EAGER_BYTES"] == "4000"
    with pytest.raises(InputError, match="--eager-bytes"):
        settings.apply(parser.parse_args(["--eager-bytes", "-3"]))
    monkeypatch.setenv("HPCBENCH_PROGRESS", "spin")
    with pytest.raises(InputError, match="HPCBENCH_PROGRESS"):
        settings.apply(parser.parse_args([]))


_CLEAN_EXIT = """
from mpi4py import MPI
from hpcbench.lifecycle import exit_process
comm = MPI.COMM_WORLD
comm.gather(comm.rank, root=0)
exit_process(int(__import__("sys").argv[1]))
"""


@pytest.mark.mpi
def test_successful_exit_is_never_taken_for_a_crash(tmp_path):
    """Every rank finalizes and leaves with 0, ten times in a row at -n 4.

    Leaving with ``os._exit`` after ``MPI_Finalize`` skipped MPICH's C exit
    handler, and mpiexec killed the other ranks (status 9) in about half of
    such runs; so ten clean runs in a row fail with the old exit by chance
    only about once in a thousand.
    """
    script = tmp_path / "clean_exit.py"
    script.write_text(_CLEAN_EXIT)
    statuses = [run_mpi(4, [str(script), "0"], timeout=60).returncode for _ in range(10)]
    assert statuses == [0] * 10

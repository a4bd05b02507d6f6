"""Running a reproduction's jobs through Slurm: one ``sbatch`` per run, the drawing as a dependent job.

Each run becomes ``OUT/slurm/FIGURE/NAME.sbatch`` (``--ntasks`` = its ranks,
``--nodes`` where the run has ``nodes`` (the manifest's, or ``--nodes``), with
``--ntasks-per-node`` where they divide, ``--time`` from its time limit,
``--exclusive`` unless told otherwise, so that timed jobs do not share
nodes) launching ``srun --mpi=pmi2 python -m
hpcbench.cli RUNNER ...`` as the sbatch templates in ``jobs/`` do; the
script writes its exit status and wall time to ``NAME.status`` beside it
(the controller forgets finished jobs after a few minutes). A figure's
drawing is submitted with ``--dependency=afterok:ID:...`` on the runs it
reads and ``--kill-on-invalid-dep=yes``, so a failed run cancels it. The
launcher polls ``squeue`` until its jobs have left the queue.
"""

from __future__ import annotations

import json
import math
import re
import shlex
import shutil
import subprocess
import time
from pathlib import Path

from hpcbench.reproduce.local import Handle
from hpcbench.reproduce.manifest import ROOT
from hpcbench.reproduce.plan import Drawing, Run
from hpcbench.runtime.errors import InputError

__all__ = ["SlurmLauncher", "slurm_available"]


def slurm_available() -> str:
    """``""`` when ``sbatch``, ``squeue`` and a controller answering ``scontrol ping`` are there, else why not."""
    missing = [c for c in ("sbatch", "squeue", "scontrol") if shutil.which(c) is None]
    if missing:
        return f"{', '.join(missing)} not found"
    try:
        out = subprocess.run(["scontrol", "ping"], capture_output=True, text=True, timeout=15).stdout
    except (OSError, subprocess.SubprocessError) as exc:
        return f"scontrol ping failed: {exc}"
    return "" if "UP" in out else f"no Slurm controller answers (scontrol ping: {out.strip() or 'nothing'})"


class SlurmLauncher:
    """Submits runs and drawings with ``sbatch`` and waits for them (``asynchronous = True``).

    Parameters
    ----------
    python : str
        The interpreter on the compute nodes (the same path: a shared file system).
    out : pathlib.Path
        The reproduction's output folder (scripts and status files go to ``OUT/slurm``).
    exclusive : bool
        Ask for whole nodes (``--exclusive``), so runs never share cores.
    sbatch_args : list of str
        More ``sbatch`` options (``--partition=...``, ``--account=...``).
    poll_s : float
        Seconds between two ``squeue`` polls.

    Raises
    ------
    InputError
        Slurm is not reachable (:func:`slurm_available`).
    """

    name = "slurm"
    asynchronous = True

    def __init__(self, python: str, out: Path, exclusive: bool = True, sbatch_args: list[str] | None = None,
                 poll_s: float = 2.0) -> None:
        why = slurm_available()
        if why:
            raise InputError(f"--launcher slurm: {why}")
        self.python, self.out, self.exclusive = python, Path(out), exclusive
        self.sbatch_args = list(sbatch_args or [])
        self.poll_s = poll_s

    def _script(self, path: Path, header: list[str], env: dict[str, str], command: list[str]) -> None:
        status = path.with_suffix(".status")
        exports = " ".join(f"{k}={shlex.quote(str(v))}" for k, v in
                           {"OMP_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1", **env}.items())
        lines = ["#!/bin/bash", *(f"#SBATCH {h}" for h in header), "",
                 f"cd {shlex.quote(str(ROOT))}", f"export {exports}", f"rm -f {shlex.quote(str(status))}",
                 "start=$(date +%s.%N)", " ".join(shlex.quote(c) for c in command), "rc=$?", "end=$(date +%s.%N)",
                 f'printf \'{{"rc": %d, "start": %s, "end": %s}}\\n\' "$rc" "$start" "$end" > '
                 f'{shlex.quote(str(status))}', 'exit "$rc"', ""]
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("\n".join(lines), encoding="utf-8")

    def _submit(self, script: Path, options: list[str], key: str, command: list[str], log: str) -> Handle:
        cmd = ["sbatch", "--parsable", *options, *self.sbatch_args, str(script)]
        proc = subprocess.run(cmd, cwd=str(ROOT), capture_output=True, text=True, timeout=120)
        handle = Handle(key, command, log)
        handle.extra["sbatch"] = cmd
        handle.extra["status"] = str(script.with_suffix(".status"))
        if proc.returncode != 0:
            handle.rc, handle.wall_s = -1, 0.0
            handle.note = f"sbatch failed: {proc.stderr.strip()[-500:]}"
            return handle
        handle.job_id = proc.stdout.strip().split(";")[0]
        handle.extra["t0"] = time.monotonic()
        return handle

    def start_run(self, run: Run, argv: list[str]) -> Handle:
        """Submit the run; returns at once (``rc`` None until :meth:`wait` sees it end)."""
        run.log.parent.mkdir(parents=True, exist_ok=True)
        run.output.parent.mkdir(parents=True, exist_ok=True)
        script = self.out / "slurm" / run.figure / f"{run.name}.sbatch"
        command = ["srun", "--mpi=pmi2", self.python, *argv]
        header = [f"--job-name=hpcbench-{run.figure}-{run.name}", f"--ntasks={run.ranks}",
                  f"--time={max(1, math.ceil(run.timeout_s / 60))}", f"--output={run.log}"]
        if run.nodes is not None:
            header.append(f"--nodes={run.nodes}")
            if run.ranks % run.nodes == 0:
                header.append(f"--ntasks-per-node={run.ranks // run.nodes}")
        if self.exclusive:
            header.append("--exclusive")
        self._script(script, header, run.job.env, command)
        return self._submit(script, [], run.key, command, str(run.log))

    def start_draw(self, drawing: Drawing, after: list[Handle]) -> Handle:
        """Submit the drawing, dependent (``afterok``) on the runs still in the queue."""
        script = self.out / "slurm" / drawing.figure / "draw.sbatch"
        log = drawing.png.with_suffix(".log")
        log.parent.mkdir(parents=True, exist_ok=True)
        command = [self.python, *drawing.argv()]
        header = [f"--job-name=hpcbench-{drawing.figure}-draw", "--ntasks=1", "--time=15", f"--output={log}"]
        self._script(script, header, {}, command)
        ids = [h.job_id for h in after if h.job_id]
        options = [f"--dependency=afterok:{':'.join(ids)}", "--kill-on-invalid-dep=yes"] if ids else []
        return self._submit(script, options, f"draw/{drawing.figure}", command, str(log))

    def _queued(self, ids: list[str]) -> set[str]:
        proc = subprocess.run(["squeue", "-h", "-o", "%i", "-j", ",".join(ids)], capture_output=True, text=True,
                              timeout=60)
        return {line.strip() for line in proc.stdout.splitlines() if line.strip()}

    def _finish(self, handle: Handle) -> None:
        status = Path(handle.extra["status"])
        if status.is_file():
            try:
                info = json.loads(status.read_text())
                handle.rc, handle.wall_s = int(info["rc"]), float(info["end"]) - float(info["start"])
                return
            except (ValueError, KeyError):
                pass
        handle.rc, handle.wall_s = -1, time.monotonic() - handle.extra.get("t0", time.monotonic())
        info = subprocess.run(["scontrol", "show", "job", handle.job_id], capture_output=True, text=True,
                              timeout=60).stdout
        state = re.search(r"JobState=(\w+)", info)
        reason = re.search(r"Reason=(\S+)", info)
        handle.note = (f"Slurm job {handle.job_id} ended as {state.group(1) if state else 'unknown'}"
                       f"{' (' + reason.group(1) + ')' if reason and reason.group(1) != 'None' else ''} "
                       f"without an exit status")

    def wait(self, handles: list[Handle]) -> list[Handle]:
        """Block until at least one of ``handles`` has left the queue; returns those that ended."""
        while True:
            running = [h for h in handles if not h.done]
            if not running:
                return list(handles)
            queued = self._queued([h.job_id for h in running])
            ended = [h for h in running if h.job_id not in queued]
            for h in ended:
                self._finish(h)
            if ended:
                return ended
            time.sleep(self.poll_s)

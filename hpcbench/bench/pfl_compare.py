"""Run the pfl baseline (:mod:`hpcbench.bench.pfl_baseline`) beside an hpcbench job and compare.

Used by ``hpcbench fl-bench --pfl PYTHON [--pfl-procs N,...]``. pfl is
measured as Flower is (:mod:`hpcbench.bench.flower_compare`), from the
launcher, outside its process tree:

- round time: the median wall time of the rounds after ``warmup``, from
  the times the first pfl process notes when each round's update (and its
  evaluation, if any) was applied;
- memory: the peak, over the run, of the sums of RSS and of PSS over the
  whole process tree: with one process, that Python; with ``N > 1``,
  ``torchrun``'s agent (``python -m torch.distributed.run --standalone
  --nnodes 1 --nproc_per_node N``, as pfl's guide for distributed
  simulation launches PyTorch models) and its ``N`` worker processes.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from hpcbench.bench.peers import isolated_pythonpath, resolve_peer_python, run_tree, steady_round

__all__ = ["resolve_python", "run_pfl", "parse_procs", "MAX_PROCS"]

#: most processes ``--pfl-procs`` may name
MAX_PROCS = 256


def resolve_python(value: str) -> str | None:
    """The Python that runs pfl for ``--pfl VALUE``, or None to skip the comparison.

    ``auto``: this interpreter when ``pfl`` and ``torch`` are importable in
    it, else None; ``none``: None; anything else: a Python executable
    (:func:`hpcbench.bench.peers.resolve_peer_python`).

    Raises
    ------
    InputError
        ``VALUE`` names no executable file, or one that cannot import ``pfl`` and ``torch``
        (tried once, before anything is launched).
    """
    return resolve_peer_python(value, "--pfl", ("pfl", "torch"))


def parse_procs(value: str) -> list[int]:
    """The process counts of ``--pfl-procs VALUE`` (comma-separated, distinct, 1..:data:`MAX_PROCS`).

    Raises
    ------
    InputError
        Naming ``--pfl-procs`` and the value.
    """
    from hpcbench.runtime.errors import InputError

    try:
        procs = [int(v) for v in value.split(",") if v]
        if not procs or min(procs) < 1 or max(procs) > MAX_PROCS or len(set(procs)) != len(procs):
            raise ValueError
    except ValueError:
        raise InputError(f"--pfl-procs: expected distinct comma-separated integers in 1..{MAX_PROCS}, "
                         f"got {value!r}") from None
    return procs


def pfl_command(python: str, procs: int, task: Path, rounds: int, out_json: Path) -> list[str]:
    """The command line of one pfl run: plain ``python -m`` for one process, ``torchrun`` for more."""
    tail = ["-m", "hpcbench.bench.pfl_baseline", "--task", str(task), "--rounds", str(rounds),
            "--json", str(out_json)]
    if procs == 1:
        return [python, *tail]
    return [python, "-m", "torch.distributed.run", "--standalone", "--nnodes", "1", "--nproc_per_node",
            str(procs), *tail]


def run_pfl(python: str, procs: int, task: Path, rounds: int, warmup: int, outdir: Path,
            interval_s: float = 0.5) -> dict:
    """Run the pfl baseline with ``procs`` processes on a task folder; its steady round time, memory, versions.

    Parameters
    ----------
    python : str
        Python executable with pfl and torch (see :func:`resolve_python`).
    procs : int
        Processes: 1 runs pfl in one Python; more run it under ``torchrun``
        (gloo on the CPU), the cohort sharded over them.
    task : pathlib.Path
        Task folder (:mod:`hpcbench.bench.peer_task`).
    rounds, warmup : int
        Rounds to run, and leading rounds left out of ``round_s`` (``warmup < rounds``).
    outdir : pathlib.Path
        Existing directory; ``pfl-N.json`` and ``pfl-N.log`` are written there.
    interval_s : float, optional
        Seconds between memory samples of the process tree.

    Returns
    -------
    dict
        ``round_s`` : float, seconds (median after ``warmup``); ``rounds_s`` :
        list of float; ``memory`` : :class:`hpcbench.bench.process_memory.TreeMemory`,
        bytes, peak over the run; ``pfl``, ``torch`` : str, versions;
        ``procs``, ``torch_threads`` : int; ``evaluations`` : list of
        ``[round, accuracy, loss]``; ``log`` : str.

    Raises
    ------
    RuntimeError
        The run failed (its output's tail is in the message).
    statistics.StatisticsError
        No round after ``warmup``.
    """
    out_json = outdir / f"pfl-{procs}.json"
    log = outdir / f"pfl-{procs}.log"
    cmd = pfl_command(python, procs, task, rounds, out_json)
    env = dict(os.environ, PYTHONPATH=isolated_pythonpath(outdir))
    rc, sampler = run_tree(cmd, log, env, interval_s)
    if rc != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed ({rc}):\n{log.read_text()[-3000:]}")
    info = json.loads(out_json.read_text())
    round_s, walls = steady_round(info, warmup)
    return {"round_s": round_s, "rounds_s": walls, "memory": sampler.peak(), "pfl": info["pfl"],
            "torch": info["torch"], "procs": info["processes"], "torch_threads": info["torch_threads"],
            "evaluations": info["evaluations"], "log": str(log)}

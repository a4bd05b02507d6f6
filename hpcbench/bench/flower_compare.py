"""Run the Flower baseline (:mod:`hpcbench.bench.flower_baseline`) beside an hpcbench job and compare.

Used by ``hpcbench fl-bench --flower PYTHON``. Both sides are measured the
same way, from the launcher, outside both process trees:

- round time: the median wall time of the rounds after ``warmup`` (hpcbench:
  ``round_wall_s`` of its ``rounds`` table; Flower: the time between the ends
  of successive rounds' aggregations, noted in the driver);
- memory: the peak, over the run, of the sums of RSS and of PSS over the
  whole process tree (:mod:`hpcbench.bench.process_memory`): for hpcbench
  ``mpiexec``, its process manager and the ranks (and the ranks alone); for
  Flower its driver (the ServerApp and the simulation engine), Ray's GCS
  server, raylet, its helper processes and the worker processes that host
  the ClientApp actors.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from hpcbench.bench.peers import isolated_pythonpath, resolve_peer_python, run_tree, steady_round
from hpcbench.bench.process_memory import TreeMemory

_STARTUP_TIMEOUT = "timed out during startup"  # Ray's message when its node fails to come up in time
_CRASHED = "Simulation Runtime crashed"  # Flower's message when its engine failed (it may then never return)

__all__ = ["resolve_python", "run_flower", "ranks_only", "LAUNCHER_NAMES"]

#: process names of the MPI launcher side (not ranks): ``mpiexec`` and MPICH's Hydra process manager
LAUNCHER_NAMES = frozenset({"mpiexec", "mpiexec.hydra", "mpirun", "hydra_pmi_proxy"})


def resolve_python(value: str) -> str | None:
    """The Python that runs Flower for ``--flower VALUE``, or None to skip the comparison.

    ``auto``: this interpreter when ``flwr`` and ``ray`` are importable in it,
    else None; ``none``: None; anything else: a Python executable
    (:func:`hpcbench.bench.peers.resolve_peer_python`).

    Raises
    ------
    InputError
        ``VALUE`` names no executable file, or one that cannot import ``flwr`` and ``ray``
        (tried once, before anything is launched).
    """
    return resolve_peer_python(value, "--flower", ("flwr", "ray"))


def run_flower(python: str, task: Path, rounds: int, warmup: int, outdir: Path,
               interval_s: float = 0.5, attempts: int = 3) -> dict:
    """Run the Flower baseline under ``python`` on a task folder; its steady round time, peak tree memory and versions.

    Ray gives its raylet a fixed 30 s to register with its GCS server; on a
    loaded machine that start-up can time out and the simulation ends before
    its first round. Such a run is repeated, up to ``attempts`` runs in all
    (the memory and times reported are those of the run that completed).

    Parameters
    ----------
    python : str
        Python executable with ``flwr[simulation]`` (see :func:`resolve_python`).
    task : pathlib.Path
        Task folder (:mod:`hpcbench.bench.peer_task`).
    rounds : int
        Rounds to run (``--rounds``).
    warmup : int
        Leading rounds left out of ``round_s``; must be less than ``rounds``.
    outdir : pathlib.Path
        Existing directory; ``flower.json`` and ``flower.log`` are written there.
    interval_s : float, optional
        Seconds between memory samples of the process tree.
    attempts : int, optional
        Most runs in all when Ray's start-up times out.

    Returns
    -------
    dict
        ``round_s`` : float, seconds (median of the rounds after ``warmup``);
        ``rounds_s`` : list of float, seconds, one per round, the first from
        the strategy's start; ``memory`` : :class:`TreeMemory`, bytes, peak
        over the run; ``flwr``, ``ray`` : str, versions; ``evaluations`` :
        list of ``[round, accuracy, loss]``; ``log`` : str, path of the run's output.

    Raises
    ------
    RuntimeError
        The Flower run failed (its output's tail is in the message).
    statistics.StatisticsError
        No round after ``warmup`` (``warmup >= rounds``).
    """
    out_json = outdir / "flower.json"
    log = outdir / "flower.log"
    cmd = [python, "-m", "hpcbench.bench.flower_baseline", "--task", str(task), "--rounds", str(rounds),
           "--json", str(out_json)]
    env = dict(os.environ, FLWR_TELEMETRY_ENABLED="0", PYTHONPATH=isolated_pythonpath(outdir))
    for attempt in range(1, attempts + 1):
        rc, sampler = run_tree(cmd, log, env, interval_s, crashed=_CRASHED)
        if rc == 0 or _STARTUP_TIMEOUT not in log.read_text() or attempt == attempts:
            break
        print(f"Flower: Ray's node start-up timed out (attempt {attempt} of {attempts}); retrying", flush=True)
    if rc != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed ({rc}):\n{log.read_text()[-3000:]}")
    info = json.loads(out_json.read_text())
    round_s, walls = steady_round(info, warmup)
    return {"round_s": round_s, "rounds_s": walls, "memory": sampler.peak(), "flwr": info["flwr"],
            "ray": info["ray"], "evaluations": info.get("evaluations", []), "log": str(log)}


def ranks_only(mem: TreeMemory) -> tuple[int, int]:
    """RSS and PSS of an MPI job's tree without its launcher processes (:data:`LAUNCHER_NAMES`).

    Parameters
    ----------
    mem : TreeMemory
        A sample (or peak) of the job's process tree, with ``by_name`` filled.

    Returns
    -------
    tuple of int
        ``(rss_bytes, pss_bytes)`` summed over the processes whose command
        name is not in :data:`LAUNCHER_NAMES`.
    """
    rss = sum(v[0] for k, v in mem.by_name.items() if k not in LAUNCHER_NAMES)
    pss = sum(v[1] for k, v in mem.by_name.items() if k not in LAUNCHER_NAMES)
    return rss, pss

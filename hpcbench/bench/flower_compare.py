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

import importlib.util
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

from hpcbench.bench.process_memory import TreeMemory, TreeSampler
from hpcbench.fl.config import FLConfig
from hpcbench.runtime.errors import InputError
from hpcbench.runtime.launch import end_process_group

_STARTUP_TIMEOUT = "timed out during startup"  # Ray's message when its node fails to come up in time

__all__ = ["resolve_python", "run_flower", "flower_settings", "ranks_only", "LAUNCHER_NAMES"]

#: process names of the MPI launcher side (not ranks): ``mpiexec`` and MPICH's Hydra process manager
LAUNCHER_NAMES = frozenset({"mpiexec", "mpiexec.hydra", "mpirun", "hydra_pmi_proxy"})


def resolve_python(value: str) -> str | None:
    """The Python that runs Flower for ``--flower VALUE``, or None to skip the comparison.

    ``auto``: this interpreter when ``flwr`` and ``ray`` are importable in it,
    else None; ``none``: None; anything else: a Python executable.

    Parameters
    ----------
    value : str
        The ``--flower`` argument: ``"auto"``, ``"none"`` or the path of a
        Python executable.

    Returns
    -------
    str or None
        Path of the Python executable (``sys.executable`` for ``"auto"``),
        or None when the comparison is skipped.

    Raises
    ------
    InputError
        ``VALUE`` names no executable file, or one that cannot import ``flwr`` and ``ray``
        (tried once, before anything is launched).
    """
    if value == "none":
        return None
    if value == "auto":
        found = all(importlib.util.find_spec(m) is not None for m in ("flwr", "ray"))
        return sys.executable if found else None
    if not (os.path.isfile(value) and os.access(value, os.X_OK)):
        raise InputError(f"--flower: {value!r} is not an executable Python (expected auto, none or a path)")
    _check_python(value)
    return value


#: seconds ``--flower PYTHON`` may take to import Flower and Ray before the benchmark starts
_IMPORT_CHECK_S = 120


def _check_python(python: str) -> None:
    """Run ``python -c "import flwr, ray"`` once, before any launch; InputError naming ``--flower`` if it fails."""
    import subprocess

    try:
        proc = subprocess.run([python, "-c", "import flwr, ray"], stdin=subprocess.DEVNULL, capture_output=True,
                              text=True, errors="replace", timeout=_IMPORT_CHECK_S)
    except subprocess.TimeoutExpired:
        raise InputError(f"--flower: {python!r} did not import flwr and ray within {_IMPORT_CHECK_S} s") from None
    except OSError as exc:
        raise InputError(f"--flower: {python!r} cannot be started: {exc.strerror or exc}") from None
    if proc.returncode != 0:
        last = (proc.stderr.strip().splitlines() or ["no message"])[-1][:200]
        raise InputError(f"--flower: {python!r} cannot import flwr and ray (exit {proc.returncode}: {last}); give "
                         f"a Python with Flower installed, auto or none")


def flower_settings(config: dict, clients: int, participants: int) -> list[str]:
    """Flags of :mod:`hpcbench.bench.flower_baseline` giving the task of an hpcbench job's ``config``.

    Parameters
    ----------
    config : dict
        The job's federated config as a plain dict: ``dataset`` (``name``,
        ``samples_per_client``), ``model`` (``name``, ``hidden``),
        ``aggregator`` (``name``), ``local_steps``, ``batch_size``,
        ``learning_rate``, ``seed``, ``eval_interval``, ``rounds``, and
        optionally ``momentum`` and ``decay_factor``.
    clients : int
        Registered clients (Flower virtual SuperNodes).
    participants : int
        Clients trained and aggregated per round.

    Returns
    -------
    list of str
        Command-line flags (``--clients``, ``--participants``,
        ``--local-steps``, ``--batch-size``, ``--learning-rate``,
        ``--samples-per-client``, ``--hidden``, ``--seed``, ``--eval-interval``
        with their values; the global model is evaluated on the test set
        after the same rounds as hpcbench's, every ``eval_interval`` and the
        last); ``--rounds`` and ``--json`` are added by :func:`run_flower`.

    Raises
    ------
    InputError
        The job is not one Flower's side reproduces (another dataset, model,
        momentum, decay factor or server optimizer, or no ``samples_per_client``).
    KeyError
        ``config`` lacks one of the required keys.
    """
    ds, model = config["dataset"], config["model"]
    unsupported = {"dataset.name": (ds["name"], "digits"), "model.name": (model["name"], "mlp"),
                   "momentum": (config.get("momentum", 0.0), 0.0),
                   "aggregator.name": (config["aggregator"]["name"], "fedavg"),
                   "decay_factor": (config.get("decay_factor", 1.0), 1.0)}
    defaults = FLConfig().model_dump()  # what the Flower side builds for every key it is not given
    for key in ("dataset.partition", "dataset.alpha", "dataset.test_fraction", "aggregator.server_learning_rate",
                "uplink_compression", "downlink_compression", "mode"):
        path = key.split(".")
        value, wanted = config, defaults
        for part in path:
            value, wanted = (value or {}).get(part), (wanted or {}).get(part)
        unsupported[key] = (value, wanted)
    for key, (value, wanted) in unsupported.items():
        if value != wanted:
            raise InputError(f"--flower: the Flower baseline runs {key} {wanted!r} only, the job has {value!r}")
    if ds.get("samples_per_client") is None:
        raise InputError("--flower: the job needs dataset.samples_per_client (every client's data size)")
    return ["--clients", str(clients), "--participants", str(participants),
            "--local-steps", str(config["local_steps"]), "--batch-size", str(config["batch_size"]),
            "--learning-rate", repr(float(config["learning_rate"])),
            "--samples-per-client", str(ds["samples_per_client"]), "--hidden", str(model["hidden"]),
            "--seed", str(config["seed"]), "--eval-interval", str(config["eval_interval"])]


def run_flower(python: str, flags: list[str], rounds: int, warmup: int, outdir: Path,
               interval_s: float = 0.5, attempts: int = 3) -> dict:
    """Run the Flower baseline under ``python``; its steady round time, peak tree memory and versions.

    Ray gives its raylet a fixed 30 s to register with its GCS server; on a
    loaded machine that start-up can time out and the simulation ends before
    its first round. Such a run is repeated, up to ``attempts`` runs in all
    (the memory and times reported are those of the run that completed).

    Returns a dict with ``round_s`` (median of the rounds after ``warmup``),
    ``rounds_s`` (every round), ``memory`` (:class:`TreeMemory`, peak over
    the run), ``flwr``, ``ray``, ``log`` (path of its output).

    Parameters
    ----------
    python : str
        Python executable with ``flwr[simulation]`` (see :func:`resolve_python`).
    flags : list of str
        Flags of the task (see :func:`flower_settings`).
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
        ``round_s`` : float, seconds; ``rounds_s`` : list of float, seconds,
        one per round, the first from the strategy's start; ``memory`` :
        :class:`TreeMemory`, bytes; ``flwr``, ``ray`` : str, versions;
        ``log`` : str, path of the run's output.

    Raises
    ------
    RuntimeError
        The Flower run failed (its output's tail is in the message).
    statistics.StatisticsError
        No round after ``warmup`` (``warmup >= rounds``).
    """
    out_json = outdir / "flower.json"
    log = outdir / "flower.log"
    cmd = [python, "-m", "hpcbench.bench.flower_baseline", *flags, "--rounds", str(rounds), "--json", str(out_json)]
    # Flower's Python sees this hpcbench package alone (a link in a folder of its own), not the rest of
    # the environment it is installed in: that venv's torch, numpy and protobuf stay Flower's
    root = outdir / "hpcbench-only"
    root.mkdir(exist_ok=True)
    link = root / "hpcbench"
    if not link.exists():
        link.symlink_to(Path(__file__).resolve().parents[1], target_is_directory=True)
    env = dict(os.environ, FLWR_TELEMETRY_ENABLED="0", PYTHONPATH=str(root))
    for attempt in range(1, attempts + 1):
        with open(log, "w") as f:
            # its own session, so that Ray's processes go with it if this process is interrupted
            proc = subprocess.Popen(cmd, stdout=f, stderr=subprocess.STDOUT, env=env, start_new_session=True)
            try:
                with TreeSampler(proc.pid, interval_s) as sampler:
                    rc = proc.wait()
            finally:
                end_process_group(proc)
        if rc == 0 or _STARTUP_TIMEOUT not in log.read_text() or attempt == attempts:
            break
        print(f"Flower: Ray's node start-up timed out (attempt {attempt} of {attempts}); retrying", flush=True)
    if rc != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed ({rc}):\n{log.read_text()[-3000:]}")
    info = json.loads(out_json.read_text())
    ends = [info["start_unix_s"], *info["round_end_unix_s"]]
    walls = [b - a for a, b in zip(ends, ends[1:])]
    return {"round_s": statistics.median(walls[warmup:]), "rounds_s": walls, "memory": sampler.peak(),
            "flwr": info["flwr"], "ray": info["ray"], "log": str(log)}


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

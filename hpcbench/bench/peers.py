"""What ``hpcbench fl-bench`` does alike for every peer simulator it compares with (Flower, pfl).

Each peer runs under a Python of its own (a separate virtualenv), on the task
of the first hpcbench job of the benchmark, read back from that job's
results file and handed over as a task folder
(:mod:`hpcbench.bench.peer_task`). This module checks that interpreter once
before anything is launched, checks that a peer can run the job's task,
writes the folder, and starts a peer's process tree in its own session while
sampling the tree's memory (:mod:`hpcbench.bench.process_memory`).
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

from hpcbench.runtime.errors import InputError

__all__ = ["resolve_peer_python", "check_job", "write_job_task", "isolated_pythonpath", "run_tree", "steady_round"]

#: seconds a peer's Python may take to import its packages before the benchmark starts
IMPORT_CHECK_S = 300


def resolve_peer_python(value: str, flag: str, modules: tuple[str, ...]) -> str | None:
    """The Python that runs a peer for ``FLAG VALUE``, or None to skip that peer.

    Parameters
    ----------
    value : str
        ``"auto"`` (this interpreter when it can import ``modules``, else
        None), ``"none"`` (None) or the path of a Python executable.
    flag : str
        The flag, for messages (``"--flower"``).
    modules : tuple of str
        What the peer's Python must import.

    Returns
    -------
    str or None
        Path of the Python executable, or None when the peer is skipped.

    Raises
    ------
    InputError
        ``value`` names no executable file, or one that cannot import ``modules``
        (tried once, before anything is launched).
    """
    if value == "none":
        return None
    if value == "auto":
        return sys.executable if all(importlib.util.find_spec(m) is not None for m in modules) else None
    if not (os.path.isfile(value) and os.access(value, os.X_OK)):
        raise InputError(f"{flag}: {value!r} is not an executable Python (expected auto, none or a path)")
    _check_imports(value, flag, modules)
    return value


def _check_imports(python: str, flag: str, modules: tuple[str, ...]) -> None:
    """Run ``python -c "import M1, M2"`` once; InputError naming ``flag`` if it fails."""
    names = " and ".join(modules)
    try:
        proc = subprocess.run([python, "-c", f"import {', '.join(modules)}"], stdin=subprocess.DEVNULL,
                              capture_output=True, text=True, errors="replace", timeout=IMPORT_CHECK_S)
    except subprocess.TimeoutExpired:
        raise InputError(f"{flag}: {python!r} did not import {names} within {IMPORT_CHECK_S} s") from None
    except OSError as exc:
        raise InputError(f"{flag}: {python!r} cannot be started: {exc.strerror or exc}") from None
    if proc.returncode != 0:
        last = (proc.stderr.strip().splitlines() or ["no message"])[-1][:200]
        raise InputError(f"{flag}: {python!r} cannot import {names} (exit {proc.returncode}: {last}); give "
                         f"a Python with them installed, auto or none")


def check_job(config: dict, flag: str) -> None:
    """Refuse a job whose task the peers do not reproduce, naming the key.

    The peers train ``local_steps`` steps of plain SGD (no momentum, no
    learning-rate decay) and average the updates weighted by examples
    (FedAvg, server learning rate 1) in synchronous rounds, uncompressed,
    with the models of :data:`hpcbench.bench.peer_task.MODEL_NAMES`, on a
    dataset whose training pool can be handed over (digits, Fashion-MNIST
    and the other array datasets).

    Parameters
    ----------
    config : dict
        The job's config as stored in its results file.
    flag : str
        The peer's flag, for the message.

    Raises
    ------
    InputError
        Naming the key, the value the job has and the one the peers run.
    """
    from hpcbench.bench.peer_task import MODEL_NAMES
    from hpcbench.fl.config import FLConfig
    from hpcbench.fl.data import dataset_class

    model = config["model"]["name"]
    if model not in MODEL_NAMES:
        raise InputError(f"{flag}: the peers build model.name {', '.join(MODEL_NAMES)}, the job has {model!r}")
    dataset = config["dataset"]["name"]
    if not hasattr(dataset_class(dataset), "training_pool"):
        raise InputError(f"{flag}: dataset.name {dataset!r} keeps no training pool the peers can read")
    defaults = FLConfig().model_dump()
    for key in ("momentum", "decay_factor", "aggregator.name", "aggregator.server_learning_rate",
                "uplink_compression", "downlink_compression", "mode"):
        value, wanted = config, defaults
        for part in key.split("."):
            value, wanted = (value or {}).get(part), (wanted or {}).get(part)
        if value != wanted:
            raise InputError(f"{flag}: the peers run {key} {wanted!r} only, the job has {value!r}")


def write_job_task(config: dict, folder: Path) -> None:
    """Build the job's dataset and initial model as the job does, and write them as a task folder.

    The clients are the dataset's registered clients, the participants per
    round the job's ``participants`` (the clients hpcbench aggregates).

    Parameters
    ----------
    config : dict
        The job's config (from its results file); checked by :func:`check_job` first.
    folder : pathlib.Path
        New folder (:func:`hpcbench.bench.peer_task.write_task`).

    Raises
    ------
    InputError
        The dataset cannot be built here (its files moved since the job ran).
    """
    from hpcbench.bench.peer_task import write_task
    from hpcbench.fl.config import FLConfig
    from hpcbench.fl.data import build_dataset
    from hpcbench.fl.models import build_model

    cfg = FLConfig.model_validate(config)
    try:
        dataset = build_dataset(cfg.dataset, cfg.seed)
    except (ValueError, OSError) as exc:
        raise InputError(f"dataset: {exc}") from None
    model = build_model(cfg.model, dataset, cfg.seed)
    settings = {"clients": dataset.num_clients, "participants": cfg.participants, "local_steps": cfg.local_steps,
                "batch_size": cfg.batch_size, "learning_rate": float(cfg.learning_rate), "seed": cfg.seed,
                "eval_interval": cfg.eval_interval, "dataset": cfg.dataset.name,
                "model": cfg.model.model_dump()}
    write_task(folder, settings, dataset, model)


def isolated_pythonpath(outdir: Path) -> str:
    """A ``PYTHONPATH`` holding this hpcbench package alone (a link in ``outdir/hpcbench-only``).

    A peer's Python then sees hpcbench's modules but not the rest of the
    environment hpcbench is installed in: that virtualenv's torch, numpy and
    protobuf stay the peer's own.
    """
    root = outdir / "hpcbench-only"
    root.mkdir(exist_ok=True)
    link = root / "hpcbench"
    if not link.exists():
        link.symlink_to(Path(__file__).resolve().parents[1], target_is_directory=True)
    return str(root)


def run_tree(cmd: list[str], log: Path, env: dict, interval_s: float = 0.5, crashed: str | None = None,
             grace_s: float = 30.0):
    """Run ``cmd`` in its own session (output to ``log``), sampling its process tree's memory.

    The whole tree is ended on any exit (:func:`hpcbench.runtime.launch.end_process_group`),
    and ``grace_s`` seconds after ``crashed`` first appears in ``log`` if it
    is still running then (Flower's simulation can report its engine crashed
    and never return).

    Returns
    -------
    tuple
        ``(returncode, hpcbench.bench.process_memory.TreeSampler)``; the
        return code is negative (the signal) for a tree ended that way.
    """
    import time

    from hpcbench.bench.process_memory import TreeSampler
    from hpcbench.runtime.launch import end_process_group

    with open(log, "w") as f:
        proc = subprocess.Popen(cmd, stdout=f, stderr=subprocess.STDOUT, env=env, start_new_session=True,
                                stdin=subprocess.DEVNULL)
        try:
            with TreeSampler(proc.pid, interval_s) as sampler:
                seen = None
                while True:
                    try:
                        rc = proc.wait(timeout=2.0)
                        break
                    except subprocess.TimeoutExpired:
                        pass
                    if crashed is not None and seen is None and crashed in log.read_text(errors="replace"):
                        seen = time.monotonic()
                    if seen is not None and time.monotonic() - seen > grace_s:
                        end_process_group(proc)
                        rc = proc.wait()
                        break
        finally:
            end_process_group(proc)
    return rc, sampler


def steady_round(info: dict, warmup: int) -> tuple[float, list[float]]:
    """Median round time after ``warmup`` rounds, and every round's, from a peer's ``--json`` output.

    Parameters
    ----------
    info : dict
        ``start_unix_s`` and ``round_end_unix_s`` (seconds).
    warmup : int
        Leading rounds left out of the median; less than the rounds run.

    Returns
    -------
    tuple
        ``(median_s, rounds_s)``.

    Raises
    ------
    statistics.StatisticsError
        No round after ``warmup``.
    """
    import statistics

    ends = [info["start_unix_s"], *info["round_end_unix_s"]]
    walls = [b - a for a, b in zip(ends, ends[1:])]
    return statistics.median(walls[warmup:]), walls

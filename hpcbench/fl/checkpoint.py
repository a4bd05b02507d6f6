"""Atomic checkpoints of the federated emulation, and what ``--resume`` checks before using one.

A checkpoint is one file written by rank 0 every ``checkpoint_interval``
rounds (sync) or server updates (async). It holds everything the loop needs to
continue as if it had never stopped: the global model, the server optimizer's
state, the selector's state (Oort's per-client arrays, exploration factor and
pacer), the uplink/downlink codecs' error-feedback residuals and step counters,
the virtual clock, FedBuff's planner (tasks in flight, buffer, counters) and
the model versions in-flight tasks started from, the summary found so far
(time-to-accuracy), the rows each results table held, and the config.

What needs no saving: every random draw of the emulation comes from a
generator seeded by ``(seed, round or selection number, purpose)`` (client
shuffles, client times, random and Oort selection), and the learning-rate
decay is a function of the round number, so the round number is their whole
position.

Format: ``torch.save`` of a dict of tensors, Python scalars, strings, lists and
dicts, read back with ``torch.load(weights_only=True)``, which never unpickles
arbitrary objects. numpy arrays are stored as tensors (their dtype kept) and
come back as numpy arrays. Writing is atomic: a temporary file in the same
folder, ``fsync``, ``os.replace``, then an ``fsync`` of the folder, so a crash
at any instant leaves either the previous checkpoint or the new one, whole.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any, Mapping

import numpy as np
import torch

from hpcbench.runtime.errors import InputError

__all__ = ["FORMAT", "RESUMABLE_KEYS", "save_checkpoint", "load_checkpoint", "config_differences",
           "to_storable", "from_storable"]

#: ``format`` entry of every checkpoint (a file without it is refused)
FORMAT = "hpcbench-fl-checkpoint/1"

#: config keys a resumed run may change: run length, display, where checkpoints go and how often,
#: which executors train at once (the results do not depend on it) and the output template (a resumed
#: run appends to the results file named in the checkpoint)
RESUMABLE_KEYS = ("rounds", "progress", "checkpoint", "checkpoint_interval", "executor_concurrency", "output")


def to_storable(obj: Any) -> Any:
    """``obj`` with every numpy array and numpy scalar turned into a tensor or a Python scalar.

    Dicts, lists and tuples (stored as lists) are converted recursively;
    str, int, float, bool and None pass through.

    Raises
    ------
    TypeError
        For any other type (it could not be loaded with ``weights_only=True``).
    """
    if isinstance(obj, np.ndarray):
        if obj.dtype == object or obj.dtype.kind in "USV":
            raise TypeError(f"cannot store a numpy array of dtype {obj.dtype} in a checkpoint")
        return torch.from_numpy(np.ascontiguousarray(obj).copy())
    if isinstance(obj, np.generic):
        return obj.item()
    if isinstance(obj, torch.Tensor):
        return obj.detach().cpu().clone()
    if isinstance(obj, Mapping):
        return {k: to_storable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [to_storable(v) for v in obj]
    if obj is None or isinstance(obj, (str, int, float, bool)):
        return obj
    raise TypeError(f"cannot store {type(obj).__name__} in a checkpoint")


def from_storable(obj: Any) -> Any:
    """Inverse of :func:`to_storable`: tensors become numpy arrays (same dtype and shape)."""
    if isinstance(obj, torch.Tensor):
        return obj.numpy()
    if isinstance(obj, Mapping):
        return {k: from_storable(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [from_storable(v) for v in obj]
    return obj


def _fsync_dir(folder: Path) -> None:
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:  # no directory handles (some platforms): the rename is still atomic
        return
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def save_checkpoint(path, state: Mapping[str, Any]) -> Path:
    """Write ``state`` to ``path`` atomically (temp file in the same folder, fsync, ``os.replace``).

    Parameters
    ----------
    path : str or pathlib.Path
        Destination; its folder is created.
    state : mapping
        The checkpoint's content (see :func:`to_storable` for what it may hold);
        ``format`` is added.

    Returns
    -------
    pathlib.Path

    Raises
    ------
    OSError
        The file cannot be written; the temporary file is removed and an
        earlier checkpoint at ``path`` is left untouched.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    payload = to_storable({**state, "format": FORMAT})
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)  # mkstemp's 0600 would differ from the results file's mode
        with os.fdopen(fd, "wb") as fh:
            torch.save(payload, fh)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    _fsync_dir(path.parent)
    return path


def load_checkpoint(path) -> dict[str, Any]:
    """Read a checkpoint written by :func:`save_checkpoint` (numpy arrays back as numpy arrays).

    Raises
    ------
    InputError
        The file is missing, unreadable, corrupt, not an hpcbench FL
        checkpoint, or holds anything but tensors and plain values; the
        message names ``--resume`` and the path.
    """
    path = Path(path)
    if not path.is_file():
        raise InputError(f"--resume: checkpoint {str(path)!r} does not exist")
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as exc:  # noqa: BLE001 - truncated zip, pickle refused, I/O error: all bad input
        raise InputError(f"--resume: {str(path)!r} is not a readable checkpoint "
                         f"({type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''})") from None
    if not isinstance(state, dict) or state.get("format") != FORMAT:
        raise InputError(f"--resume: {str(path)!r} is not an hpcbench fl checkpoint (format {FORMAT!r})")
    return from_storable(state)


def _flatten(tree: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    out = {}
    for key, value in tree.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping):
            out.update(_flatten(value, name + "."))
        else:
            out[name] = value
    return out


def config_differences(saved_json: str, current: Mapping[str, Any]) -> list[str]:
    """Dotted config keys whose values differ between a checkpoint's config and ``current``.

    Keys of :data:`RESUMABLE_KEYS` (top level) are not reported. A section
    switched to another strategy (``selection.name``) reports its name and
    every option that differs.

    Parameters
    ----------
    saved_json : str
        The checkpoint's config as JSON (``FLConfig.model_dump`` of the run
        that wrote it).
    current : mapping
        ``FLConfig.model_dump()`` of the resuming run.

    Returns
    -------
    list of str
        Sorted, e.g. ``["aggregator.eta", "seed"]``.
    """
    saved = _flatten(json.loads(saved_json))
    now = _flatten(json.loads(json.dumps(current, default=str)))
    keys = set(saved) | set(now)
    return sorted(k for k in keys
                  if k.split(".")[0] not in RESUMABLE_KEYS and saved.get(k, "<unset>") != now.get(k, "<unset>"))

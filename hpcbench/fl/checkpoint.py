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

Format (``hpcbench-fl-checkpoint/2``): a first line ``HPCBENCH-FL-CHECKPOINT``,
a second line of JSON ``{"format", "sha256", "bytes"}`` (at most
:data:`_HEADER_MAX` bytes), then the payload: ``torch.save`` of a dict of
tensors, Python scalars, strings, lists and dicts. Reading checks, before
anything else happens and before any byte is unpickled: the first line, the
payload's length and its SHA-256 digest (a flipped or missing byte is
refused); then the payload is read with ``torch.load(weights_only=True)``,
which never unpickles arbitrary objects, and checked against the schema
(:data:`SCHEMA`: every key the loop restores, with its type). numpy arrays
are stored as tensors (their dtype kept) and come back as numpy arrays.
Every checkpoint names the results file it belongs to by absolute path and
by the file's ``run_id``: a resumed run appends to that file only, and only
if its ``run_id`` matches. Writing is atomic: a temporary file in the same
folder, ``fsync``, ``os.replace``, then an ``fsync`` of the folder, so a crash
at any instant leaves either the previous checkpoint or the new one, whole.
"""

from __future__ import annotations

import hashlib
import io
import json
import warnings
from pathlib import Path
from typing import Any, Mapping

import numpy as np
import torch

from hpcbench.runtime.bounded import ExpansionError, expanded_size
from hpcbench.runtime.errors import InputError

__all__ = ["FORMAT", "RESUMABLE_KEYS", "SCHEMA", "save_checkpoint", "load_checkpoint", "check_schema",
           "config_differences", "to_storable", "from_storable"]

#: ``format`` entry of every checkpoint (a file without it is refused)
FORMAT = "hpcbench-fl-checkpoint/2"
_MAGIC = b"HPCBENCH-FL-CHECKPOINT\n"
_HEADER_MAX = 4096

#: key -> accepted types of every checkpoint's content (``tables`` maps table names to row counts)
SCHEMA: dict[str, tuple] = {
    "format": (str,), "config": (str,), "mode": (str,), "step": (int,), "output": (str,), "run_id": (str,),
    "params": (np.ndarray,), "aggregator": (dict,), "selector": (dict,), "uplink": (dict, type(None)),
    "downlink": (dict, type(None)), "clock_now_s": (float, int), "stop": (bool,), "wall_s": (float, int),
    "tables": (dict,), "summary": (dict,),
}
#: the extra keys of an asynchronous (FedBuff) checkpoint
ASYNC_SCHEMA: dict[str, tuple] = {"planner": (dict,), "versions": (dict,)}
_SUMMARY_KEYS = ("rounds", "final_accuracy", "time_to_accuracy_s", "rounds_to_accuracy")

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
    from hpcbench.runtime.outputs import replace_atomically

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    buffer = io.BytesIO()
    torch.save(to_storable({**state, "format": FORMAT}), buffer)
    payload = buffer.getvalue()
    header = json.dumps({"format": FORMAT, "sha256": hashlib.sha256(payload).hexdigest(),
                         "bytes": len(payload)}).encode() + b"\n"

    def write(tmp: Path) -> None:
        with open(tmp, "wb") as fh:
            fh.write(_MAGIC + header)
            fh.write(payload)

    return replace_atomically(path, write)


def _read_verified(path: Path) -> bytes:
    """The payload of the checkpoint at ``path`` once its first line, length and digest check out."""
    bad = f"--resume: {str(path)!r}"
    try:
        with open(path, "rb") as fh:
            magic = fh.read(len(_MAGIC))
            if magic != _MAGIC:
                raise InputError(f"{bad} is not an hpcbench fl checkpoint (format {FORMAT!r}; checkpoints "
                                 f"written before it carry no integrity digest and cannot be resumed)")
            line = fh.readline(_HEADER_MAX)
            try:
                header = json.loads(line)
                digest, size = str(header["sha256"]), int(header["bytes"])
            except (ValueError, KeyError, TypeError, RecursionError):
                raise InputError(f"{bad} has a corrupt header") from None
            if header.get("format") != FORMAT:
                raise InputError(f"{bad} is a checkpoint of format {header.get('format')!r}; this hpcbench reads "
                                 f"{FORMAT!r}")
            payload = fh.read(size + 1)
    except OSError as exc:
        raise InputError(f"{bad} cannot be read: {exc.strerror or exc}") from None
    if len(payload) != size:
        raise InputError(f"{bad} is {'truncated' if len(payload) < size else 'longer than written'} "
                         f"({len(payload)} payload bytes, {size} written): not resumable")
    if hashlib.sha256(payload).hexdigest() != digest:
        raise InputError(f"{bad} is corrupt: its content does not match its SHA-256 digest (changed since it "
                         f"was written); not resumable")
    return payload


def check_schema(state: Any, where: str = "checkpoint") -> dict[str, Any]:
    """``state`` if it holds every key :data:`SCHEMA` (and, for ``mode: async``, :data:`ASYNC_SCHEMA`) names, with its type.

    Raises
    ------
    InputError
        A key is missing or of the wrong type; the message names the key.
    """
    if not isinstance(state, dict):
        raise InputError(f"{where}: expected a dict of checkpoint entries, got {type(state).__name__}")
    schema = {**SCHEMA, **(ASYNC_SCHEMA if state.get("mode") == "async" else {})}
    for key, types in schema.items():
        if key not in state:
            raise InputError(f"{where}: missing entry {key!r}: not resumable")
        value = state[key]
        if not isinstance(value, types) or (bool not in types and isinstance(value, bool)):
            raise InputError(f"{where}: entry {key!r} is a {type(value).__name__}, expected "
                             f"{' or '.join(t.__name__ for t in types)}: not resumable")
    if state["format"] != FORMAT:
        raise InputError(f"{where}: format {state['format']!r}, expected {FORMAT!r}")
    if state["mode"] not in ("sync", "async"):
        raise InputError(f"{where}: entry 'mode' is {state['mode']!r}, expected 'sync' or 'async'")
    if state["step"] < 0 or not state["output"] or not state["run_id"]:
        raise InputError(f"{where}: entries 'step', 'output' and 'run_id' must be set: not resumable")
    params = state["params"]
    if params.ndim != 1 or params.dtype != np.float32:
        raise InputError(f"{where}: entry 'params' must be a flat float32 array, got {params.dtype} of shape "
                         f"{params.shape}")
    if not all(isinstance(k, str) and isinstance(v, int) and not isinstance(v, bool) and v >= 0
               for k, v in state["tables"].items()):
        raise InputError(f"{where}: entry 'tables' must map table names to row counts")
    missing = [k for k in _SUMMARY_KEYS if k not in state["summary"]]
    if missing:
        raise InputError(f"{where}: entry 'summary' lacks {', '.join(missing)}: not resumable")
    return state


def load_checkpoint(path, schema: bool = True) -> dict[str, Any]:
    """Read and verify a checkpoint written by :func:`save_checkpoint` (numpy arrays back as numpy arrays).

    Nothing is unpickled before the payload's length and SHA-256 digest
    match the header; then (``schema``, the default) the content is checked
    against :data:`SCHEMA`.
    Loader warnings are kept quiet (a checkpoint that passed the digest was
    written by :func:`save_checkpoint`; one that did not is never loaded).

    Raises
    ------
    InputError
        The file is missing, a directory, unreadable, truncated, corrupt (digest
        mismatch), not an hpcbench FL checkpoint, holds anything but tensors
        and plain values, or lacks an entry the loop restores; the message
        names ``--resume`` and the path.
    """
    from hpcbench.runtime.bounded import check_input_file

    path = check_input_file(path, "--resume", "checkpoint", "checkpoint")
    payload = _read_verified(path)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            state = torch.load(io.BytesIO(payload), map_location="cpu", weights_only=True)
    except Exception as exc:  # noqa: BLE001 - pickle refused, corrupt zip: all bad input
        raise InputError(f"--resume: {str(path)!r} is not a readable checkpoint "
                         f"({type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''})") from None
    try:
        expanded_size(state, 10 * len(payload) + 10_000, "the checkpoint")
        state = from_storable(state)
    except (ExpansionError, RecursionError) as exc:
        raise InputError(f"--resume: {str(path)!r} is not a checkpoint this hpcbench wrote "
                         f"({'nested too deeply' if isinstance(exc, RecursionError) else exc})") from None
    return check_schema(state, f"--resume: {str(path)!r}") if schema else state


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

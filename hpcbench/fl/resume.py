"""What ``--resume`` checks, on rank 0, before the results file is touched.

:func:`hpcbench.fl.checkpoint.load_checkpoint` has verified the file
(digest, schema); here the checkpoint is checked against the job it is
meant to continue and the results file it names: the model size, the
strategies' and codecs' state (loaded into this job's aggregator, selector
and codecs, exactly as the loop will), FedBuff's planner and kept model
versions, and the results file itself, opened read-only: it must be the
file this checkpoint belongs to (same ``run_id``, kind ``fl``) and hold at
least the rows the checkpoint counted. Only when all of this holds does the
lifecycle reopen the file for appending; until then nothing on disk changes.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np

from hpcbench.runtime.errors import InputError

__all__ = ["verify_resume", "TABLES"]

#: the tables a checkpoint of each mode counts rows of
TABLES = {"sync": {"rounds", "clients"}, "async": {"rounds", "tasks"}}
_PLANNER_KEYS = {"version", "now_s", "tasks", "selections", "in_flight", "buffer", "stale", "dropouts"}


def _load_states(state: dict, setup, where: str) -> None:
    parts = [("aggregator", setup.aggregator), ("selector", setup.clock.selector),
             ("uplink", setup.uplink), ("downlink", setup.downlink)]
    for key, target in parts:
        if target is None:
            if key in ("uplink", "downlink") and state[key] is not None:
                raise InputError(f"{where}: it holds {key} codec state, but this job compresses no {key}")
            continue
        if state[key] is None:
            raise InputError(f"{where}: it holds no {key} state, which this job needs")
        try:
            target.load_state_dict(state[key])
        except (KeyError, ValueError, TypeError, IndexError, AttributeError) as exc:
            raise InputError(f"{where}: its {key} state does not fit this job ({type(exc).__name__}: "
                             f"{str(exc)[:200]})") from None


def _check_async(state: dict, num_params: int, where: str) -> None:
    planner = state["planner"]
    if set(planner) != _PLANNER_KEYS:
        raise InputError(f"{where}: its FedBuff planner state has keys {sorted(planner)}, expected "
                         f"{sorted(_PLANNER_KEYS)}")
    for key in ("in_flight", "buffer", "stale", "dropouts"):
        rows = planner[key]
        if not isinstance(rows, list) or any(not isinstance(r, list) or len(r) != 9 for r in rows):
            raise InputError(f"{where}: its FedBuff planner entry {key!r} is not a list of task rows")
    for version, model in state["versions"].items():
        if not (isinstance(model, np.ndarray) and model.dtype == np.float32 and model.shape == (num_params,)):
            raise InputError(f"{where}: kept model version {version!r} is not a float32 array of "
                             f"{num_params} parameters")


def _check_results_file(state: dict, where: str) -> None:
    import h5py

    from hpcbench.results.reader import checked

    path = Path(state["output"])
    if not path.is_file():
        raise InputError(f"{where}: the results file it belongs to, {str(path)!r}, does not exist")
    try:
        with h5py.File(checked(path, where), "r") as h5:
            attrs = h5.attrs
            run_id = attrs.get("run_id", "")
            run_id = run_id.decode() if isinstance(run_id, bytes) else str(run_id)
            kind = attrs.get("kind", "")
            if (kind.decode() if isinstance(kind, bytes) else str(kind)) != "fl":
                raise InputError(f"{where}: {str(path)!r} is not an fl results file")
            if run_id != state["run_id"]:
                raise InputError(f"{where}: {str(path)!r} is not the results file of this checkpoint's run "
                                 f"(run_id {run_id or 'none'!r}, the checkpoint's {state['run_id']!r}); "
                                 f"a resume appends only to its own run's file")
            for name, rows in state["tables"].items():
                held = int(h5[name].attrs["rows"]) if name in h5 else -1
                if held < rows:
                    raise InputError(f"{where}: {str(path)!r} holds {max(held, 0)} rows of table {name!r}, "
                                     f"fewer than the {rows} the checkpoint counted")
    except InputError:
        raise
    except BlockingIOError:
        raise InputError(f"{where}: {str(path)!r} is open in another process (a run still writing it?)") from None
    except (OSError, KeyError, ValueError) as exc:
        raise InputError(f"{where}: cannot read its results file {str(path)!r} ({type(exc).__name__}: "
                         f"{str(exc)[:200]})") from None


def verify_resume(state: dict[str, Any], setup, path: str) -> None:
    """Check a loaded checkpoint against this job and its results file (rank 0; reads, never writes).

    Parameters
    ----------
    state : dict
        :func:`hpcbench.fl.checkpoint.load_checkpoint`'s result.
    setup : hpcbench.fl.setup.Setup
        This job's prepared parts; the checkpoint's strategy and codec state
        is loaded into them (the loop loads the same state again).
    path : str
        The checkpoint, for messages.

    Raises
    ------
    InputError
        Anything that does not fit; nothing has been modified.
    """
    where = f"--resume: {path!r}"
    params = state["params"]
    if params.shape != (setup.num_parameters,):
        raise InputError(f"{where}: its model has {params.size} parameters, this job's {setup.num_parameters}")
    if not np.all(np.isfinite(params)):
        raise InputError(f"{where}: its model parameters are not all finite")
    if not (math.isfinite(state["clock_now_s"]) and state["clock_now_s"] >= 0):
        raise InputError(f"{where}: its virtual clock {state['clock_now_s']!r} is not a time")
    mode = state["mode"]
    if set(state["tables"]) != TABLES[mode]:
        raise InputError(f"{where}: it counts rows of tables {sorted(state['tables'])}, a {mode} run has "
                         f"{sorted(TABLES[mode])}")
    _load_states(state, setup, where)
    if mode == "async":
        _check_async(state, setup.num_parameters, where)
    _check_results_file(state, where)

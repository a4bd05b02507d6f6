"""An hpcbench FL result file as FedScale's ``testing_perf`` pickle, for existing analysis scripts.

FedScale's aggregator (``fedscale/cloud/aggregation/aggregator.py``) keeps a
``testing_history`` dict and pickles it to ``<log dir>/testing_perf`` after
every evaluation::

    {'data_set': ..., 'model': ..., 'sample_mode': ..., 'gradient_policy': ...,
     'task': ..., 'perf': OrderedDict(round -> {'round', 'clock', 'loss',
     'top_1', 'top_5'})}

with ``clock`` the virtual clock in seconds when the round's evaluation ran
(FedScale tests after round ``r``'s training, as hpcbench evaluates row ``r``),
``loss`` the mean test loss and ``top_1``/``top_5`` accuracies as fractions.
:func:`testing_perf` builds the same structure from the ``rounds`` table (the
evaluated rounds only: ``virtual_time_s``, ``test_loss``, ``test_accuracy``).
hpcbench measures top-1 accuracy only, so ``top_5`` is NaN. Values are plain
Python ``int``/``float``/``str``, so the pickle loads without numpy.
"""

from __future__ import annotations

import math
import pickle
from collections import OrderedDict
from pathlib import Path

from hpcbench.fl.fedscale_conf import GRADIENT_POLICIES
from hpcbench.runtime.errors import InputError

__all__ = ["testing_perf", "write_testing_perf"]

#: FedScale's ``task`` for hpcbench's dataset kinds (``FederatedDataset.input_kind``)
_TASKS = {"features": "cv", "tokens": "nlp"}


def testing_perf(path: str | Path) -> dict:
    """FedScale's ``testing_history`` dict from an hpcbench FL result file.

    Parameters
    ----------
    path : str or pathlib.Path
        HDF5 file written by ``hpcbench fl`` (``kind`` attribute ``fl``).

    Returns
    -------
    dict
        ``data_set``, ``model``, ``sample_mode`` (selector), ``gradient_policy``
        (FedScale's spelling where FedScale has the optimizer, else hpcbench's
        name), ``task`` and ``perf``: an ``OrderedDict`` from round (int) to
        ``{'round': int, 'clock': float s, 'loss': float nat, 'top_1': float,
        'top_5': nan}`` for each evaluated round, in round order.

    Raises
    ------
    InputError
        The file is missing, not HDF5, not an FL result, or has no rounds table.
    """
    from hpcbench.fl.data import DATASETS
    from hpcbench.results import read_attrs, read_table

    from hpcbench.runtime.bounded import short_repr

    path = Path(path)
    if path.is_dir():
        raise InputError(f"{path}: is a directory, not a result file")
    if not path.is_file():
        raise InputError(f"{path}: no such file")
    try:
        attrs = read_attrs(path)
        rounds = read_table(path, "rounds")
    except OSError:
        raise InputError(f"{path}: not an HDF5 file") from None
    except (KeyError, ValueError, TypeError, RecursionError) as exc:
        raise InputError(f"{path}: not an hpcbench FL result file ({short_repr(str(exc), 200)})") from None
    if attrs.get("kind") != "fl" or "config" not in attrs:
        raise InputError(f"{path}: not an hpcbench FL result file (kind {short_repr(attrs.get('kind'))})")
    try:
        cfg = attrs["config"]
        perf: OrderedDict = OrderedDict()
        for r, clock, loss, acc in zip(rounds["round"], rounds["virtual_time_s"], rounds["test_loss"],
                                       rounds["test_accuracy"]):
            if math.isnan(acc):
                continue
            perf[int(r)] = {"round": int(r), "clock": float(clock), "loss": float(loss), "top_1": float(acc),
                            "top_5": math.nan}
        aggregator = str(cfg["aggregator"]["name"])
        policy = {v: k for k, v in GRADIENT_POLICIES.items()}.get(aggregator, aggregator)
        dataset = DATASETS.get(cfg["dataset"]["name"])
        return {"data_set": str(cfg["dataset"]["name"]), "model": str(cfg["model"]["name"]),
                "sample_mode": str(cfg["selection"]["name"]), "gradient_policy": policy,
                "task": _TASKS.get(getattr(dataset, "input_kind", ""), "cv"), "perf": perf}
    except (KeyError, TypeError, ValueError) as exc:
        raise InputError(f"{path}: not an hpcbench FL result file (its config or rounds table lacks "
                         f"{short_repr(str(exc), 100)})") from None


def write_testing_perf(path: str | Path, out: str | Path | None = None,
                       overwrite: bool = False) -> tuple[Path, dict]:
    """Write :func:`testing_perf` of ``path`` as a pickle, atomically.

    Parameters
    ----------
    path : str or pathlib.Path
        hpcbench FL result file.
    out : str or pathlib.Path, optional
        Pickle to write; default ``<path without .h5>.testing_perf.pkl``.
    overwrite : bool
        Replace an existing ``out`` (refused otherwise).

    Returns
    -------
    (pathlib.Path, dict)
        The file written and what it holds. The file appears whole or not at
        all (written to a temporary file in the same folder, then renamed
        into place, under the output's lock).

    Raises
    ------
    InputError
        As :func:`testing_perf`; ``out`` is a directory, or exists and ``overwrite`` is false, or cannot be
        written; or another run holds it (the output rules: :mod:`hpcbench.runtime.outputs`).
    """
    from hpcbench.runtime.outputs import Output, check_outputs, claim_outputs, replace_atomically

    history = testing_perf(path)
    target = Output("--output", out if out is not None else Path(path).with_suffix(".testing_perf.pkl"))
    check_outputs([target], overwrite, {"--fedscale": path})
    claimed = claim_outputs([target])
    try:
        out = target.p
        if out.exists() and not overwrite:  # created by another process since the check
            raise InputError(f"--output: {str(out)!r} exists; pass --overwrite to replace it")
        replace_atomically(out, lambda tmp: tmp.write_bytes(pickle.dumps(history, protocol=4)))
    except OSError as exc:
        raise InputError(f"--output: cannot write {str(out)!r}: {exc.strerror or exc}") from None
    finally:
        claimed.release()
    return out, history

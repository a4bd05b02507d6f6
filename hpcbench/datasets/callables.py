"""User factories named ``package.module:callable`` in a config, and their provenance.

A config key that takes a registered name (``model.name``, ``dataset.name``)
also takes ``package.module:callable``: the module is imported from
``sys.path`` (e.g. ``PYTHONPATH``) and the attribute, dotted for a class
member, must be callable. The runner defines what the callable receives and
returns; this module only finds it and records where it came from.
"""

from __future__ import annotations

import hashlib
import importlib
import re
import sys
from pathlib import Path
from typing import Callable

from hpcbench.runtime.errors import InputError

__all__ = ["is_callable_name", "resolve_callable", "registered_or_callable", "load_user_arrays", "callable_provenance",
           "user_callables"]

_NAME = re.compile(r"^[A-Za-z_][\w]*(\.[A-Za-z_][\w]*)*:[A-Za-z_][\w]*(\.[A-Za-z_][\w]*)*$")


def is_callable_name(name: str) -> bool:
    """Whether ``name`` has the ``package.module:callable`` form (a registered name never has a colon)."""
    return ":" in name


def resolve_callable(name: str, key: str) -> Callable:
    """The callable ``name`` names.

    Parameters
    ----------
    name : str
        ``package.module:callable`` (``callable`` may be dotted: ``module:Class.build``).
    key : str
        The config key, for messages.

    Returns
    -------
    callable

    Raises
    ------
    InputError
        A malformed name, a module that cannot be imported (with the
        import's own error), a missing attribute, or one that is not callable.
    """
    if not _NAME.match(name):
        raise InputError(f"{key}: {name!r} is neither a registered name nor package.module:callable")
    module_name, attr = name.split(":")
    try:
        obj = importlib.import_module(module_name)
    except Exception as exc:
        raise InputError(f"{key}: {name!r}: cannot import module {module_name!r} "
                         f"({type(exc).__name__}: {exc})") from None
    for part in attr.split("."):
        if not hasattr(obj, part):
            raise InputError(f"{key}: {name!r}: module {module_name!r} has no attribute {attr!r}")
        obj = getattr(obj, part)
    if not callable(obj):
        raise InputError(f"{key}: {name!r} is a {type(obj).__name__}, not callable")
    return obj


def registered_or_callable(name: str, registry, key: str) -> str:
    """A config validator's check: ``name`` is in ``registry`` or a ``package.module:callable`` that resolves.

    Parameters
    ----------
    name : str
    registry : hpcbench.runtime.registry.Registry
    key : str
        The config key, for messages.

    Raises
    ------
    InputError
        Unknown name (:class:`hpcbench.runtime.registry.UnknownName`), or see :func:`resolve_callable`.
    """
    if is_callable_name(name):
        resolve_callable(name, key)
        return name
    return registry.check(name)


def load_user_arrays(name: str, key: str, config: dict, seed: int) -> dict:
    """Call the dataset factory ``name`` as ``factory(config, seed)`` and check its arrays (docs/byo.md).

    Parameters
    ----------
    name : str
        ``package.module:callable``.
    key : str
        The config key naming it (``dataset.name``), for messages.
    config : dict
        The runner's dataset section as a dict (its ``options`` mapping for the factory's own keys).
    seed : int
        The job's seed.

    Returns
    -------
    dict of str to ndarray
        ``x_train`` float32 or uint8 ``(n, F)`` or ``(n, C, H, W)``, ``y_train`` int64 ``(n,)`` >= 0,
        ``x_test`` and ``y_test`` likewise (the same sample shape), and ``clients`` int64 ``(n,)`` when
        the factory gave it; the factory's arrays (``numpy.asarray``: no copy of arrays already numpy).

    Raises
    ------
    InputError
        Naming ``key``, the callable and what was wrong: it cannot be resolved,
        the factory raised, or returned something else than those arrays.
    """
    import numpy as np

    where = f"{key}: {name!r}"
    factory = resolve_callable(name, key)
    try:
        result = factory(config, seed)
    except Exception as exc:
        raise InputError(f"{where} raised {type(exc).__name__}: {exc}") from None
    if not hasattr(result, "keys"):
        raise InputError(f"{where} returned a {type(result).__name__}; expected a mapping of x_train, y_train, "
                         f"x_test, y_test[, clients] arrays")
    arrays = {k: np.asarray(result[k]) for k in ("x_train", "y_train", "x_test", "y_test", "clients")
              if k in result}
    for split in ("train", "test"):
        for k in (f"x_{split}", f"y_{split}"):
            if k not in arrays:
                raise InputError(f"{where}: no {k!r} array")
        x, y = arrays[f"x_{split}"], arrays[f"y_{split}"]
        if x.dtype not in (np.float32, np.uint8) or x.ndim not in (2, 4):
            raise InputError(f"{where}: x_{split} has {x.dtype} {x.shape}; expected float32 or uint8 (n, F) "
                             f"features or (n, C, H, W) images")
        if y.dtype != np.int64 or y.shape != (len(x),):
            raise InputError(f"{where}: y_{split} must be int64 of shape ({len(x)},), got {y.dtype} {y.shape}")
        if len(y) and y.min() < 0:
            raise InputError(f"{where}: y_{split} has negative labels")
    if arrays["x_train"].shape[1:] != arrays["x_test"].shape[1:] or not len(arrays["x_train"]) or \
            not len(arrays["x_test"]):
        raise InputError(f"{where}: x_train {arrays['x_train'].shape} and x_test {arrays['x_test'].shape} differ "
                         f"in sample shape, or one is empty")
    clients = arrays.get("clients")
    if clients is not None and (clients.dtype != np.int64 or clients.shape != arrays["y_train"].shape):
        raise InputError(f"{where}: clients must be int64 of shape ({len(arrays['y_train'])},), got "
                         f"{clients.dtype} {clients.shape}")
    return arrays


def callable_provenance(name: str) -> dict[str, str]:
    """Where ``name``'s callable came from: its module's file and that file's SHA-256.

    Parameters
    ----------
    name : str
        A ``package.module:callable`` already resolved (its module imported).

    Returns
    -------
    dict
        ``callable`` (the name), ``file`` (absolute path, or ``""`` for a
        module without one) and ``sha256`` (hex digest of the file's bytes, or ``""``).
    """
    module = sys.modules.get(name.split(":")[0])
    file = getattr(module, "__file__", None)
    if not file:
        return {"callable": name, "file": "", "sha256": ""}
    path = Path(file).resolve()
    return {"callable": name, "file": str(path), "sha256": hashlib.sha256(path.read_bytes()).hexdigest()}


def user_callables(*names: str) -> str:
    """The provenance of those of ``names`` that are callables, as JSON text (``"[]"`` when none is).

    A JSON list of :func:`callable_provenance` records, for a results file's
    provenance attributes (which hold scalars and strings).
    """
    import json

    return json.dumps([callable_provenance(n) for n in names if is_callable_name(n)])

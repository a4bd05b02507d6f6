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

__all__ = ["is_callable_name", "resolve_callable", "registered_or_callable", "callable_provenance", "user_callables"]

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

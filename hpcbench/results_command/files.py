"""Opening result files for the ``results`` actions: one message per kind of bad file."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from hpcbench.runtime.errors import InputError

__all__ = ["load", "find"]


def load(path) -> dict[str, Any]:
    """Root attributes of results file ``path`` (read without HDF5's lock: a running job's file opens too).

    Raises
    ------
    InputError
        ``path`` is missing, not HDF5 (saying so when its run recorded a failure it could not write into
        it), or not an hpcbench results file (no ``schema_version``).
    """
    from hpcbench.results.reader import read_attrs, read_consistent
    from hpcbench.results.status import _recorded_failure

    p = Path(path)
    if not p.is_file():
        raise InputError(f"{str(p)!r}: no such file")
    try:
        attrs = read_consistent(p, read_attrs)
    except OSError as exc:
        failed = _recorded_failure(p, None)
        if failed is not None:
            raise InputError(f"{str(p)!r} is unreadable: its run failed: {failed.detail}") from None
        raise InputError(f"{str(p)!r} is not an HDF5 file ({exc})") from None
    except ValueError as exc:
        raise InputError(f"{str(p)!r}: {exc}") from None
    if "schema_version" not in attrs:
        raise InputError(f"{str(p)!r} is not an hpcbench results file (no schema_version attribute)")
    return attrs


def find(paths) -> list[Path]:
    """The ``.h5`` files under each directory (recursively, sorted) and each file given.

    Raises
    ------
    InputError
        A path does not exist.
    """
    out: list[Path] = []
    for path in map(Path, paths):
        if path.is_dir():
            out += sorted(p for p in path.rglob("*.h5") if p.is_file())
        elif path.is_file():
            out.append(path)
        else:
            raise InputError(f"{str(path)!r}: no such file or directory")
    return out

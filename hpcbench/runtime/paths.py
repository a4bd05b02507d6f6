"""Checks of the files a job reads and writes, with messages that say what is wrong with the path.

Files a job writes (its results file, an FL checkpoint) follow one rule,
checked before the run starts so that nothing is found at the first write
half way through a run:

- a path that names a directory is refused;
- an existing file is refused unless the caller allows replacing it
  (``--overwrite``, or the very checkpoint a resumed run continues);
- the parent folder of a *relative* path is created when missing (under the
  working directory: ``--output results/x.h5`` works in a fresh clone); the
  parent of an *absolute* path must exist (a typo in ``/scratch/...`` is
  refused instead of creating folders at the filesystem root);
- the folder that will hold the file must be writable.
"""

from __future__ import annotations

import os
from pathlib import Path

from hpcbench.runtime.errors import InputError

__all__ = ["input_file", "check_output_path", "same_file"]


def input_file(path: str | os.PathLike, key: str, what: str = "file") -> Path:
    """``path`` as an existing regular file to read, or an InputError saying what it is instead.

    Raises
    ------
    InputError
        ``path`` does not exist, is a directory, is not a regular file, or
        cannot be read; the message starts with ``key``.
    """
    p = Path(path)
    try:
        if p.is_dir():
            raise InputError(f"{key}: {str(p)!r} is a directory, not a {what}")
        if not p.exists():
            raise InputError(f"{key}: {what} {str(p)!r} does not exist")
        if not p.is_file():
            raise InputError(f"{key}: {str(p)!r} is not a regular file")
    except OSError as exc:  # e.g. a path component that is a file, a name too long
        raise InputError(f"{key}: cannot use {str(p)!r}: {exc.strerror or exc}") from None
    if not os.access(p, os.R_OK):
        raise InputError(f"{key}: {what} {str(p)!r} is not readable")
    return p


def same_file(a: str | os.PathLike, b: str | os.PathLike) -> bool:
    """Whether two paths name the same file (existing or not: symbolic links and ``..`` resolved)."""
    try:
        if Path(a).exists() and Path(b).exists():
            return os.path.samefile(a, b)
        return Path(a).resolve() == Path(b).resolve()
    except OSError:
        return os.path.abspath(a) == os.path.abspath(b)


def _writable(folder: Path) -> bool:
    """Whether a file can be created in ``folder`` (tried: permissions alone miss read-only and virtual file systems)."""
    import tempfile

    if not os.access(folder, os.W_OK | os.X_OK):
        return False
    try:
        fd, probe = tempfile.mkstemp(prefix=".hpcbench-probe-", dir=folder)
    except OSError:
        return False
    os.close(fd)
    os.unlink(probe)
    return True


def _nearest_existing(folder: Path) -> Path:
    while not folder.exists() and folder != folder.parent:
        folder = folder.parent
    return folder


def check_output_path(path: str | os.PathLike, key: str, replace: bool = False) -> Path:
    """Check a file the job will write (the rule in the module docstring); creates nothing.

    Parameters
    ----------
    path : str or os.PathLike
        The file.
    key : str
        The flag or config key that named it, for messages (``"output"``).
    replace : bool
        An existing file may be replaced (``--overwrite``).

    Returns
    -------
    pathlib.Path

    Raises
    ------
    InputError
        Naming ``key`` and the path.
    """
    p = Path(path)
    try:
        if p.is_dir():
            raise InputError(f"{key}: {str(p)!r} is a directory")
        if p.exists() and not replace:
            raise InputError(f"{key}: {str(p)!r} exists; pass --overwrite to replace it, or choose another "
                             f"--{key}")
        parent = p.parent
        if not parent.exists():
            if p.is_absolute():
                raise InputError(f"{key}: folder {str(parent)!r} does not exist (the folders of an absolute "
                                 f"path are never created; those of a relative path are)")
            base = _nearest_existing(parent)
            if not base.is_dir():
                raise InputError(f"{key}: cannot create folder {str(parent)!r}: {str(base)!r} is not a folder")
            if not _writable(base):
                raise InputError(f"{key}: cannot create folder {str(parent)!r}: {str(base)!r} is not writable")
        elif not parent.is_dir():
            raise InputError(f"{key}: {str(parent)!r} is not a folder")
        elif not _writable(parent):
            raise InputError(f"{key}: folder {str(parent)!r} is not writable")
    except OSError as exc:
        raise InputError(f"{key}: cannot use {str(p)!r}: {exc.strerror or exc}") from None
    return p

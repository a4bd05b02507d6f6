"""Bounds on untrusted structured input: how many values shared references expand to, and short reprs.

YAML aliases (``*a``) and pickle's memo references let a few hundred bytes
stand for billions of values: the parsed object shares one list many times
over, which costs nothing until something walks it as a tree (``repr``,
``numpy.asarray``, a validator), and then it costs gigabytes and minutes
("billion laughs"). :func:`expanded_size` counts the values an object stands
for with every shared reference expanded, in time linear in the number of
*distinct* containers, and stops at a limit; callers refuse inputs beyond it
before anything walks them. :func:`short_repr` formats any value within a
bounded number of characters without walking more of it than it shows.

Files are bounded too (docs/architecture.md, "Data-safety guarantees", input
bounds): :func:`check_input_file` and :func:`read_input` accept only a
regular file of at most a stated number of bytes, checked before anything is
read, so a device (``/dev/zero``, ``/dev/urandom``), a FIFO, a socket or an
oversized file is an input error naming the key and the file in
milliseconds, not a hang or a memory blow-up. The bound of each kind of input
is one constant here (:data:`INPUT_BOUNDS`) and is stated in the error.
"""

from __future__ import annotations

import os
import reprlib
import stat
from pathlib import Path
from typing import Any

from hpcbench.runtime.errors import InputError

__all__ = ["ExpansionError", "expanded_size", "yaml_node_size", "short_repr", "INPUT_BOUNDS", "InputFileError",
           "check_input_file", "read_input", "byte_size"]

#: Largest file accepted, in bytes, of each kind of input (decompressed size for ``*.gz``): YAML job files,
#: FedScale job files and reproduce manifests are text a person writes; traces hold up to millions of
#: samples (FedScale's published client traces are tens of MB); a checkpoint holds a model's float32
#: parameters and the strategy's state; results files and profiles are read a table at a time.
INPUT_BOUNDS: dict[str, int] = {
    "config": 1 << 20,
    "fedscale": 1 << 20,
    "manifest": 1 << 20,
    "trace": 1 << 30,
    "data": 1 << 30,
    "checkpoint": 16 << 30,
    "results": 64 << 30,
}

_CONTAINERS = (dict, list, tuple, set, frozenset)


class InputFileError(InputError):
    """An input file refused before (or while) it is read: ``"{key}: {what} {path!r} {detail}"``.

    Attributes
    ----------
    key, what, path, detail : str
        The flag or key that gave the file, how it is named, the path, and what is wrong with it.
    """

    def __init__(self, key: str, what: str, path, detail: str) -> None:
        self.key, self.what, self.path, self.detail = key, what, os.fspath(path), detail
        super().__init__(f"{key}: {what} {self.path!r} {detail}")

    def __reduce__(self):  # picklable across processes
        return (type(self), (self.key, self.what, self.path, self.detail))


class ExpansionError(ValueError):
    """An input expands beyond the allowed number of values, or contains itself."""


def _children(obj):
    if isinstance(obj, dict):
        for key, value in obj.items():
            yield key
            yield value
    else:
        yield from obj


def _count(root, is_container, children, limit: int, what: str) -> int:
    """Shared post-order walk of :func:`expanded_size` and :func:`yaml_node_size` (iterative, memoised)."""
    if not is_container(root):
        return 1
    sizes: dict[int, int] = {}
    open_: set[int] = set()
    stack = [(root, False)]
    while stack:
        node, closing = stack.pop()
        key = id(node)
        if closing:
            open_.discard(key)
            total = 1 + sum(sizes[id(c)] if is_container(c) else 1 for c in children(node))
            if total > limit:
                raise ExpansionError(f"{what} expands to more than {limit} values (shared references "
                                     f"such as YAML aliases or pickle memo entries repeat their contents)")
            sizes[key] = total
            continue
        if key in sizes:
            continue
        open_.add(key)
        stack.append((node, True))
        for child in children(node):
            if is_container(child) and id(child) not in sizes:
                if id(child) in open_:
                    raise ExpansionError(f"{what} contains itself (a recursive alias or reference)")
                stack.append((child, False))
    return sizes[id(root)]


def expanded_size(obj: Any, limit: int, what: str = "the input") -> int:
    """Number of values ``obj`` stands for when every shared reference is expanded.

    A container counts itself plus the expanded size of each item (a dict:
    each key and each value); anything else counts 1. The walk visits each
    distinct container once, however often it is shared.

    Parameters
    ----------
    obj : object
        Parsed input (dict, list, tuple, set, frozenset and scalars).
    limit : int
        Largest size accepted.
    what : str
        Names the input in the error message.

    Returns
    -------
    int
        The expanded size (at most ``limit``).

    Raises
    ------
    ExpansionError
        The expanded size exceeds ``limit``, or ``obj`` contains itself.
    """
    return _count(obj, lambda o: isinstance(o, _CONTAINERS), _children, limit, what)


def yaml_node_size(node, limit: int, what: str = "the YAML document") -> int:
    """:func:`expanded_size` of a composed YAML node graph (before any Python object is built).

    Aliases are shared nodes here, and merge keys (``<<: *a``) reference the
    merged mapping's node, so counting the graph bounds what constructing it
    (which copies merged entries) will cost.

    Raises
    ------
    ExpansionError
        As :func:`expanded_size`.
    """
    import yaml

    def is_container(n):
        return isinstance(n, yaml.CollectionNode)

    def children(n):
        if isinstance(n, yaml.MappingNode):
            for key, value in n.value:
                yield key
                yield value
        else:
            yield from n.value

    return _count(node, is_container, children, limit, what)


def _bounded_repr(limit: int) -> reprlib.Repr:
    r = reprlib.Repr()
    r.maxlevel = 3
    r.maxdict = r.maxlist = r.maxtuple = r.maxset = r.maxfrozenset = r.maxdeque = r.maxarray = 6
    r.maxstring = r.maxother = max(limit, 8)
    r.maxlong = 40
    return r


def short_repr(value: Any, limit: int = 120) -> str:
    """A repr of ``value`` of at most about ``limit`` characters, however large or shared ``value`` is.

    Nested containers are shown to three levels and six items each
    (``reprlib``); whatever is left out is written ``...``. Safe on
    anything: a repr that raises is replaced by the type name.
    """
    try:
        text = _bounded_repr(limit).repr(value)
    except Exception:  # noqa: BLE001 - a message must never fail
        return f"<{type(value).__name__}>"
    if len(text) > limit:
        return f"{text[:limit]}..."
    return text


def byte_size(n: int) -> str:
    """``n`` bytes written for a message: ``1048576 bytes (1 MiB)``."""
    for unit, shift in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if n >= 1 << shift:
            return f"{n} bytes ({n / (1 << shift):g} {unit})"
    return f"{n} bytes"


def _kind_of(mode: int) -> str:
    for test, name in ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO (named pipe)"),
                       (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
                       (stat.S_ISSOCK, "a socket")):
        if test(mode):
            return name
    return "not a regular file"


def _check_stat(st: os.stat_result, path, key: str, what: str, limit: int) -> None:
    if not stat.S_ISREG(st.st_mode):
        raise InputFileError(key, what, path, f"is {_kind_of(st.st_mode)}; inputs are read only from regular "
                                              f"files (of at most {byte_size(limit)} for a {what})")
    if st.st_size > limit:
        raise InputFileError(key, what, path, f"is {byte_size(st.st_size)}, more than the bound of "
                                              f"{byte_size(limit)} for a {what}")


def _limit(kind: str) -> int:
    try:
        return INPUT_BOUNDS[kind]
    except KeyError:
        raise ValueError(f"unknown input kind {kind!r} (one of {sorted(INPUT_BOUNDS)})") from None


def check_input_file(path: str | os.PathLike, key: str, kind: str, what: str | None = None) -> Path:
    """``path`` once it names an existing, readable regular file within the bound of ``kind``.

    For readers that open the file themselves (HDF5, torch): a FIFO, a device
    or a socket is refused before anything opens it (opening a FIFO for
    reading blocks until a writer comes; a device never ends).

    Parameters
    ----------
    path : str or os.PathLike
        The file given.
    key : str
        The flag or config key that gave it, e.g. ``"--resume"``; every message starts with it.
    kind : str
        A key of :data:`INPUT_BOUNDS`: the bound applied and stated.
    what : str, optional
        How the file is named in messages (default: ``"<kind> file"``).

    Returns
    -------
    pathlib.Path

    Raises
    ------
    InputFileError
        Missing, unreadable, not a regular file, or larger than the bound (an :class:`InputError`: exit 2).
    """
    limit, what = _limit(kind), what or f"{kind} file"
    p = Path(path)
    try:
        st = p.stat()
    except FileNotFoundError:
        raise InputFileError(key, what, p, "does not exist") from None
    except OSError as exc:  # a component that is a file, a name too long, a loop of links
        raise InputFileError(key, what, p, f"cannot be used: {exc.strerror or exc}") from None
    _check_stat(st, p, key, what, limit)
    if not os.access(p, os.R_OK):
        raise InputFileError(key, what, p, "is not readable")
    return p


_CHUNK = 1 << 20


def _read_at_most(fh, n: int) -> bytes:
    """At most ``n`` bytes of ``fh``, read 1 MiB at a time.

    ``fh.read(n)`` would allocate a buffer of ``n`` bytes up front (1 GiB
    for a trace's bound) whatever the file's size; reading in chunks keeps
    the memory at the size of what is there.
    """
    parts, got = [], 0
    while got < n:
        chunk = fh.read(min(_CHUNK, n - got))
        if not chunk:
            break
        parts.append(chunk)
        got += len(chunk)
    return b"".join(parts)


def read_input(path: str | os.PathLike, key: str, kind: str, what: str | None = None, *,
               gunzip: bool | None = None) -> bytes:
    """The bytes of input file ``path``, read only if it is a regular file within the bound of ``kind``.

    The file is opened non-blocking (a FIFO swapped in after the check still
    cannot block), its type and size checked on the open descriptor, and at
    most bound + 1 bytes read, so a file growing while read is refused too.
    A gzipped file (``gunzip``, by default a ``.gz`` suffix) is bounded by its
    decompressed size as well (no gzip bomb).

    Parameters
    ----------
    path, key, kind, what
        As :func:`check_input_file`.
    gunzip : bool, optional
        Decompress (default: when ``path`` ends in ``.gz``).

    Returns
    -------
    bytes
        The file's (decompressed) content, at most ``INPUT_BOUNDS[kind]`` bytes.

    Raises
    ------
    InputFileError
        As :func:`check_input_file`; also a read error, a corrupt gzip stream,
        or decompressed content beyond the bound.
    """
    import gzip
    import zlib

    limit, what = _limit(kind), what or f"{kind} file"
    p = Path(path)
    check_input_file(p, key, kind, what)
    try:
        fd = os.open(p, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError as exc:
        raise InputFileError(key, what, p, f"cannot be read: {exc.strerror or exc}") from None
    try:
        with os.fdopen(fd, "rb") as fh:
            _check_stat(os.fstat(fh.fileno()), p, key, what, limit)
            if gunzip if gunzip is not None else p.suffix == ".gz":
                with gzip.GzipFile(fileobj=fh, mode="rb") as gz:
                    data = _read_at_most(gz, limit + 1)
                if len(data) > limit:
                    raise InputFileError(key, what, p, f"decompresses to more than the bound of "
                                                       f"{byte_size(limit)} for a {what}")
                return data
            data = _read_at_most(fh, limit + 1)
    except (OSError, EOFError, zlib.error) as exc:
        detail = getattr(exc, "strerror", None) or exc
        raise InputFileError(key, what, p, f"cannot be read: {detail}") from None
    if len(data) > limit:
        raise InputFileError(key, what, p, f"grew beyond the bound of {byte_size(limit)} while read")
    return data

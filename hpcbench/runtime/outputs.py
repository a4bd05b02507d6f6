"""Every file a run writes: declared up front, checked together, locked for the run, replaced atomically.

One mechanism for all of them (the results HDF5 file, an FL checkpoint,
a Chrome trace, a TensorBoard run folder, ``results export -o``, the
folder of ``hpcbench reproduce --out``, a figure):

1. **declared**: an :class:`Output` names the flag or config key, the path
   and its kind (a file, or a folder the run writes into);
2. **checked together** before the run starts (:func:`check_outputs`):
   no path ends with ``/`` where a file is meant (``--output DIR/`` would
   otherwise write a file named ``DIR``); each is a regular file or absent
   (a folder, a FIFO or a device is refused); an existing file only with
   ``--overwrite`` (or when the run continues it, ``may_exist``); outputs
   differ from each other and from every input file; the folder that will
   hold each can be written (:func:`hpcbench.runtime.paths.check_output_path`);
3. **locked** for the run (:class:`OutputLock`): before anything is created
   or truncated, an exclusive lock on ``.NAME.lock`` beside the output, a
   file that carries the holder's host, process and run id. A file another
   live run holds is refused (exit 2) whatever the flags; the kernel drops
   the lock of a process that dies, so a killed run's lock file is taken
   over (stale) by the next run, as ``results`` tells a vanished writer;
4. **written through a temporary file** in the same folder and renamed over
   the path only when complete (:func:`replace_atomically`), so the path
   holds either the old content or the new one, whole. A run ended by an
   abort removes the temporary it was writing (:func:`discard_pending`);
   one a kill left is removed by the next run that locks the output.

The lock file also serialises writers and readers of a live results file:
the writer holds byte 1 exclusively while it writes (:meth:`OutputLock.writing`)
and readers hold it shared while they read (:func:`read_window`), so
``hpcbench results show`` on a running job sees the state of its last
flush, never half of an append.

Locks are Linux open-file-description byte-range locks (``F_OFD_SETLK``:
held per open file, released when the process ends, shared with NFS
clients as POSIX locks); elsewhere ``lockf`` (per process). On a file
system without locks the run proceeds with one warning.

This module does not import MPI, h5py or torch.
"""

from __future__ import annotations

import errno
import fcntl
import json
import os
import socket
import stat
import struct
import sys
import tempfile
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterator, Mapping, Sequence

from hpcbench.runtime.errors import InputError

__all__ = ["Output", "OutputLock", "OutputSet", "check_outputs", "claim_outputs", "replace_atomically",
           "read_window", "lock_path", "holder", "in_use", "refuse_folder_name", "temp_beside", "discard_pending"]

_OFD = sys.platform.startswith("linux") and hasattr(fcntl, "F_OFD_SETLK")
_OWNER, _WRITE = 0, 1       # bytes of the lock file: run ownership, write window
#: longest a writer waits for readers to finish before writing anyway (s); a reader holds the window for ms
_WRITER_WAIT_S = 2.0
#: longest a reader waits for a write in progress (s)
_READER_WAIT_S = 5.0
_INFO_BYTES = 4096          # the lock file's holder record, padded (rewritten in place: no new blocks needed)
_warned_unlocked = False


@dataclass(frozen=True)
class Output:
    """One file (or folder) a run will write.

    Attributes
    ----------
    key : str
        The flag or config key that names it (``"output"``, ``"checkpoint"``,
        ``"chrome_trace"``), for messages.
    path : str or os.PathLike
        As given (a trailing ``/`` is kept so that it can be refused).
    folder : bool
        The run writes files into this folder (a TensorBoard run, a
        reproduction's ``--out``) instead of writing the path itself; the
        folder may exist.
    may_exist : bool
        An existing file is the one this run continues (a resumed run's
        results file and checkpoint): allowed without ``--overwrite``.
    """

    key: str
    path: str | os.PathLike
    folder: bool = False
    may_exist: bool = False

    @property
    def p(self) -> Path:
        """The path as a :class:`pathlib.Path`."""
        return Path(self.path)


def refuse_folder_name(text: str | os.PathLike, key: str) -> None:
    """Refuse a file name that ends with a path separator (``DIR/``): it names a folder.

    Raises
    ------
    InputError
        Naming ``key`` and the path.
    """
    text = os.fspath(text)
    if text.endswith(os.sep) or (os.altsep and text.endswith(os.altsep)):
        raise InputError(f"{key}: {text!r} ends with {text[-1]!r}: it names a folder, not a file; give a file "
                         f"name (e.g. {text.rstrip('/' + (os.altsep or ''))or '.'}/run.h5)")


def _same(a: Path, b: Path) -> bool:
    from hpcbench.runtime.paths import same_file

    return same_file(a, b)


def check_outputs(outputs: Sequence[Output], overwrite: bool,
                  inputs: Mapping[str, str | os.PathLike] | None = None) -> list[Path]:
    """Check every output of a run together, before anything is written (the rules in the module docstring).

    Parameters
    ----------
    outputs : sequence of Output
    overwrite : bool
        ``--overwrite``: an existing file may be replaced.
    inputs : mapping of str to path, optional
        The run's input files by key; no output may be one of them.

    Returns
    -------
    list of pathlib.Path
        The outputs' paths, in order.

    Raises
    ------
    InputError
        Naming the key and path of the first output that breaks a rule.
    """
    from hpcbench.runtime.paths import check_output_path

    paths = []
    for out in outputs:
        p = out.p
        if not out.folder:
            refuse_folder_name(out.path, out.key)
        try:
            st = os.lstat(p)
        except FileNotFoundError:
            st = None
        except OSError as exc:
            raise InputError(f"{out.key}: cannot use {str(p)!r}: {exc.strerror or exc}") from None
        if st is not None:
            if out.folder:
                if not p.is_dir():
                    raise InputError(f"{out.key}: {str(p)!r} exists and is not a folder")
                if not (overwrite or out.may_exist) and any(p.iterdir()):
                    raise InputError(f"{out.key}: folder {str(p)!r} exists and is not empty; pass --overwrite to "
                                     f"write into it, or choose another")
            elif stat.S_ISLNK(st.st_mode):
                raise InputError(f"{out.key}: {str(p)!r} is a symbolic link; name the file itself")
            elif stat.S_ISDIR(st.st_mode):
                raise InputError(f"{out.key}: {str(p)!r} is a directory")
            elif not stat.S_ISREG(st.st_mode):
                raise InputError(f"{out.key}: {str(p)!r} is not a regular file (a FIFO, socket or device); "
                                 f"outputs are regular files")
        if out.folder:  # a run folder in a log folder (DIR/<run>): the log folder may be created too
            if st is None:
                check_output_path(p if p.parent.exists() else p.parent, out.key)
        else:
            check_output_path(p, out.key, replace=overwrite or out.may_exist)
        paths.append(p)
    for i, out in enumerate(outputs):
        for other in outputs[:i]:
            if _same(out.p, other.p):
                if other.key == "output":
                    raise InputError(f"{out.key}: {str(out.path)!r} is the results file itself (--output "
                                     f"{str(other.path)!r}); the two must differ")
                raise InputError(f"{out.key}: {str(out.path)!r} is also {other.key}'s file; every file a run "
                                 f"writes must differ")
            if out.folder != other.folder and _inside(out, other):
                inner, outer = (out, other) if not out.folder else (other, out)
                raise InputError(f"{inner.key}: {str(inner.path)!r} lies in {outer.key}'s folder "
                                 f"{str(outer.path)!r}, which another writer fills")
        for key, path in (inputs or {}).items():
            if path is not None and _same(out.p, Path(path)):
                raise InputError(f"{out.key}: {str(out.path)!r} is the input file of {key}; an output may never "
                                 f"replace an input")
    return paths


def _inside(a: Output, b: Output) -> bool:
    inner, outer = (a, b) if b.folder else (b, a)
    try:
        return Path(os.path.abspath(inner.p)).is_relative_to(os.path.abspath(outer.p))
    except (OSError, ValueError):
        return False


def lock_path(path: str | os.PathLike) -> Path:
    """``.NAME.lock`` beside ``path``: the lock file of an output."""
    p = Path(os.path.abspath(path))
    return p.parent / f".{p.name}.lock"


def temp_beside(path: str | os.PathLike, tag: str = "") -> Path:
    """A new, unique temporary name in ``path``'s folder (``.NAME.XXXX.tmp``; created empty, mode 0644 less umask)."""
    p = Path(path)
    fd, tmp = tempfile.mkstemp(prefix=f".{p.name}.{tag + '.' if tag else ''}", suffix=".tmp", dir=p.parent)
    os.close(fd)
    umask = os.umask(0)
    os.umask(umask)
    os.chmod(tmp, 0o666 & ~umask)
    return Path(tmp)


def _fsync_dir(folder: Path) -> None:
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def replace_atomically(path: str | os.PathLike, write: Callable[[Path], None]) -> Path:
    """Write ``path`` through a temporary file beside it: ``write(tmp)``, fsync, ``os.replace``, fsync of the folder.

    Parameters
    ----------
    path : str or os.PathLike
        The output; its folder must exist.
    write : callable
        Called with the temporary path; writes the whole content there.

    Returns
    -------
    pathlib.Path

    Raises
    ------
    OSError
        From ``write`` or the file system; the temporary file is removed and
        ``path`` keeps its previous content (or stays absent).
    """
    path = Path(path)
    tmp = temp_beside(path)
    _PENDING.add(tmp)
    try:
        write(tmp)
        with open(tmp, "rb+") as fh:
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    finally:
        _PENDING.discard(tmp)
    _fsync_dir(path.parent)
    return path


#: temporary files :func:`replace_atomically` is writing now (a failure listener removes them before an abort)
_PENDING: set[Path] = set()


def discard_pending() -> None:
    """Remove the temporary files being written now: the process is about to be ended by an abort.

    Called from the lifecycle's failure paths (another thread may be in the
    middle of :func:`replace_atomically`; its rename then fails, which no
    longer matters): a run that ends that way leaves no ``.NAME.XXXX.tmp``.
    """
    for tmp in list(_PENDING):
        try:
            os.unlink(tmp)
        except OSError:
            pass


def _remove_stale_temporaries(path: Path) -> None:
    """Remove ``.NAME.*.tmp`` beside ``path`` left by a killed holder (call only while holding its lock)."""
    import re

    mine = re.compile(rf"\.{re.escape(Path(path).name)}\.[a-z0-9_]{{8}}\.tmp")  # temp_beside's names, no other's
    try:
        for tmp in Path(path).parent.glob(f".{Path(path).name}.*.tmp"):
            if mine.fullmatch(tmp.name) and tmp.is_file() and not tmp.is_symlink():
                tmp.unlink()
    except OSError:
        pass


# ----------------------------------------------------------------------------------------------- locks
def _setlk(fd: int, kind: int, byte: int, wait: bool = False) -> None:
    """Set (or with ``F_UNLCK`` clear) a one-byte lock at ``byte``; raises OSError (EAGAIN/EACCES) when held."""
    if _OFD:
        cmd = fcntl.F_OFD_SETLKW if wait else fcntl.F_OFD_SETLK
        fcntl.fcntl(fd, cmd, struct.pack("hhqqi4x", kind, os.SEEK_SET, byte, 1, 0))
        return
    op = {fcntl.F_RDLCK: fcntl.LOCK_SH, fcntl.F_WRLCK: fcntl.LOCK_EX, fcntl.F_UNLCK: fcntl.LOCK_UN}[kind]
    fcntl.lockf(fd, op | (0 if wait or kind == fcntl.F_UNLCK else fcntl.LOCK_NB), 1, byte, os.SEEK_SET)


def _held(exc: OSError) -> bool:
    return exc.errno in (errno.EAGAIN, errno.EACCES, errno.EWOULDBLOCK)


def _unsupported(exc: OSError) -> bool:
    return exc.errno in (errno.ENOLCK, errno.EOPNOTSUPP, errno.ENOSYS, errno.EINVAL)


def _poll(fd: int, kind: int, byte: int, limit_s: float) -> bool:
    """Try the lock until ``limit_s`` has passed; True once held."""
    deadline = time.monotonic() + limit_s
    pause = 1e-3
    while True:
        try:
            _setlk(fd, kind, byte)
            return True
        except OSError as exc:
            if not _held(exc):
                return False
        if time.monotonic() >= deadline:
            return False
        time.sleep(pause)
        pause = min(pause * 2, 0.02)


def holder(path: str | os.PathLike) -> dict:
    """What the lock file of output ``path`` says of its holder (``{}`` when absent or unreadable)."""
    try:
        with open(lock_path(path), "rb") as fh:
            text = fh.read(_INFO_BYTES).decode("utf-8", "replace").strip("\0 \n")
        info = json.loads(text) if text else {}
        return info if isinstance(info, dict) else {}
    except (OSError, ValueError, RecursionError):
        return {}


def in_use(path: str | os.PathLike) -> bool:
    """Whether a live process holds the lock of output ``path`` (False without a lock file or where locks fail)."""
    try:
        fd = os.open(lock_path(path), os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return False
    try:
        _setlk(fd, fcntl.F_RDLCK, _OWNER)
    except OSError as exc:
        return _held(exc)
    else:
        _setlk(fd, fcntl.F_UNLCK, _OWNER)
        return False
    finally:
        os.close(fd)


def _describe(info: dict) -> str:
    if not info:
        return "its holder did not say who it is"
    parts = [f"process {info.get('pid', '?')} on {info.get('host', '?')}"]
    if info.get("run_id"):
        parts.append(f"run {info['run_id']}")
    if info.get("since"):
        parts.append(f"since {info['since']}")
    return ", ".join(parts)


def _in_use_error(path: Path, key: str) -> InputError:
    return InputError(f"{key}: {str(path)!r} is in use by another run ({_describe(holder(path))}); nothing was "
                      f"written. Wait for it to end, or choose another {key}")


def refuse_in_use(outputs: Sequence[Output]) -> None:
    """Refuse (before a run prepares anything) an output that another live run holds; takes no lock.

    Raises
    ------
    InputError
        Naming the key, the path and the holder.
    """
    for out in outputs:
        if in_use(out.p):
            raise _in_use_error(out.p, out.key)


class OutputLock:
    """The exclusive lock of one output for the length of a run (see the module docstring).

    Use :meth:`acquire`; :meth:`release` removes the lock file. A lock the
    process still holds when it dies is dropped by the kernel; the lock file
    stays and the next run takes it over.

    Attributes
    ----------
    path : pathlib.Path
        The output.
    key : str
        Its flag or config key.
    """

    def __init__(self, path: Path, key: str, fd: int | None) -> None:
        self.path, self.key, self._fd = path, key, fd
        self._writing = 0
        self._window = False
        self._keep = False
        self._info: dict = {}

    @classmethod
    def acquire(cls, path: str | os.PathLike, key: str, run_id: str = "") -> "OutputLock":
        """Lock output ``path`` for this process (its folder must exist).

        Raises
        ------
        InputError
            Another live process holds it; the message names ``key``, the
            path and the holder (host, process, run id).
        """
        global _warned_unlocked
        path = Path(path)
        lp = lock_path(path)
        for _ in range(5):
            try:
                fd = os.open(lp, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW, 0o644)
            except OSError as exc:
                raise InputError(f"{key}: cannot create the lock file {str(lp)!r}: {exc.strerror or exc}") from None
            try:
                _setlk(fd, fcntl.F_WRLCK, _OWNER)
            except OSError as exc:
                if _held(exc):
                    os.close(fd)
                    raise _in_use_error(path, key) from None
                if _unsupported(exc):
                    if not _warned_unlocked:
                        sys.stderr.write(f"warning: {key}: the file system of {str(path)!r} does not support "
                                         f"locks; concurrent runs on the same files are not detected\n")
                        _warned_unlocked = True
                    lock = cls(path, key, fd)
                    lock._record(run_id)
                    return lock
                os.close(fd)
                raise InputError(f"{key}: cannot lock {str(lp)!r}: {exc.strerror or exc}") from None
            try:
                same = os.path.samestat(os.fstat(fd), os.stat(lp))
            except OSError:
                same = False
            if not same:  # the previous holder removed the lock file between our open and our lock
                os.close(fd)
                continue
            lock = cls(path, key, fd)
            lock._record(run_id)
            return lock
        raise InputError(f"{key}: {str(path)!r}: could not take its lock file {str(lp)!r} (it kept changing)")

    def _record(self, run_id: str) -> None:
        self._info = {"host": socket.gethostname(), "pid": os.getpid(), "run_id": run_id, "key": self.key,
                      "path": str(Path(os.path.abspath(self.path))),
                      "since": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
        try:
            os.ftruncate(self._fd, 0)
            self._write_info()
        except OSError:
            pass  # the lock holds without the record; messages then say less

    def _write_info(self) -> None:
        text = json.dumps(self._info).encode()
        if len(text) > _INFO_BYTES:
            self._info["error"] = self._info.get("error", "")[:_INFO_BYTES // 2]
            text = json.dumps(self._info).encode()[:_INFO_BYTES]
        os.pwrite(self._fd, text.ljust(_INFO_BYTES, b" "), 0)  # the same blocks: fits on a full disk

    def record_failure(self, error: str) -> None:
        """Keep ``state: failed`` and ``error`` in the lock file, which then outlives :meth:`release`.

        For an output that could not record its own failure (a full disk):
        :func:`hpcbench.results.status.file_status` reads it from there.
        Never raises.
        """
        if self._fd is None:
            return
        self._info.update(state="failed", error=str(error))
        try:
            self._write_info()
            os.fsync(self._fd)
            self._keep = True
        except OSError:
            pass

    @property
    def held(self) -> bool:
        """True until :meth:`release`."""
        return self._fd is not None

    def begin_write(self) -> None:
        """Take the write window (readers wait); after :data:`_WRITER_WAIT_S` s of readers, write anyway."""
        if self._fd is None:
            return
        self._writing += 1
        if self._writing == 1:
            self._window = _poll(self._fd, fcntl.F_WRLCK, _WRITE, _WRITER_WAIT_S)

    def end_write(self) -> None:
        """Give the write window back (after the write's flush)."""
        if self._fd is None or not self._writing:
            return
        self._writing -= 1
        if self._writing == 0 and self._window:
            try:
                _setlk(self._fd, fcntl.F_UNLCK, _WRITE)
            except OSError:
                pass
            self._window = False

    @contextmanager
    def writing(self) -> Iterator[None]:
        """``with lock.writing():`` around a write and its flush (re-entrant within one thread's nesting)."""
        self.begin_write()
        try:
            yield
        finally:
            self.end_write()

    def release(self) -> None:
        """Remove the lock file (if still this lock's) and drop the lock; idempotent."""
        fd, self._fd = self._fd, None
        if fd is None:
            return
        try:
            lp = lock_path(self.path)
            try:
                if not self._keep and os.path.samestat(os.fstat(fd), os.stat(lp)):
                    os.unlink(lp)
            except OSError:
                pass
        finally:
            os.close(fd)


@contextmanager
def read_window(path: str | os.PathLike) -> Iterator[bool]:
    """Hold the read side of output ``path``'s write window while reading it (yields whether a writer was seen).

    Without a lock file (no run writes it) this holds nothing. A write in
    progress is waited for (at most :data:`_READER_WAIT_S` s); the writer
    waits for this reader in turn, so keep the block short.
    """
    try:
        fd = os.open(lock_path(path), os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW)
    except OSError:
        yield False
        return
    try:
        locked = _poll(fd, fcntl.F_RDLCK, _WRITE, _READER_WAIT_S)
        try:
            yield True
        finally:
            if locked:
                try:
                    _setlk(fd, fcntl.F_UNLCK, _WRITE)
                except OSError:
                    pass
    finally:
        os.close(fd)


class OutputSet:
    """The locks of every output of one run, taken together (:func:`claim_outputs`); released together."""

    def __init__(self, locks: dict[str, OutputLock], created: list[Path]) -> None:
        self.locks = locks
        self._created = created

    def __getitem__(self, key: str) -> OutputLock:
        return self.locks[key]

    def path(self, key: str) -> Path:
        """The checked, locked path of output ``key``."""
        return self.locks[key].path

    def release(self) -> None:
        """Release every lock (removing the lock files); idempotent."""
        for lock in self.locks.values():
            lock.release()

    def undo(self) -> None:
        """Release every lock and remove the folders :func:`claim_outputs` created (a run refused after the claim)."""
        self.release()
        for folder in reversed(self._created):
            try:
                folder.rmdir()
            except OSError:
                pass


def claim_outputs(outputs: Sequence[Output], run_id: str = "") -> OutputSet:
    """Create the missing folders of checked outputs and lock every output; all or none.

    Call after :func:`check_outputs`. The folders a relative path needs are
    created (and removed again if a lock is refused).

    Raises
    ------
    InputError
        An output is in use by another run (nothing is left locked or created).
    """
    created: list[Path] = []
    locks: dict[str, OutputLock] = {}
    claimed = OutputSet(locks, created)
    try:
        for out in outputs:
            folder = out.p if out.folder else out.p.parent
            missing = []
            f = Path(os.path.abspath(folder))
            while not f.exists() and f != f.parent:
                missing.append(f)
                f = f.parent
            try:
                folder.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                raise InputError(f"{out.key}: cannot create folder {str(folder)!r}: {exc.strerror or exc}") from None
            created += reversed(missing)
            key = out.key
            while key in locks:
                key += "'"
            locks[key] = OutputLock.acquire(out.p, out.key, run_id)
            if not out.folder:
                _remove_stale_temporaries(out.p)
    except BaseException:
        claimed.undo()
        raise
    return claimed

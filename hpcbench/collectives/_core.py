"""Internals shared by the collective algorithms: buffers, reducers, tags, scratch.

Not public API; see :mod:`hpcbench.collectives.api`.
"""

from __future__ import annotations

import sys
import threading
import time
from typing import Any

import numpy as np
from mpi4py import MPI

from hpcbench.collectives.persistent import PlanCache
from hpcbench.collectives.slots import SlotPool
from hpcbench.collectives.tags import MIN_TAG_UB, TagSpace
from hpcbench.collectives.transport import P2PRequest, Transport
from hpcbench.collectives.waiting import TwoPhaseBackoff
from hpcbench.runtime.wait import Backoff


def _torch():
    """The torch module if this process has imported it, else None.

    The core never imports torch itself: a buffer can only be a torch tensor
    if its owner imported torch, and a numpy-only process (an emulated
    training rank) saves torch's ~150 MB of private memory per process.
    """
    return sys.modules.get("torch")

__all__ = ["DTYPES", "OPS", "Work", "Reducer", "reducer", "Context", "context_for",
           "partition", "run_inline", "inline_backoff"]

#: supported element types (name -> numpy dtype used to move the bytes)
DTYPES = {"float32": np.dtype(np.float32), "float64": np.dtype(np.float64),
          "int64": np.dtype(np.int64), "bfloat16": np.dtype(np.int16)}
#: supported reduction operations
OPS = ("sum", "avg", "max", "min")

_NP_KIND = {np.dtype(np.float32): "float32", np.dtype(np.float64): "float64",
            np.dtype(np.int64): "int64"}


def _torch_kind(t) -> str | None:
    torch = _torch()
    return {torch.float32: "float32", torch.float64: "float64", torch.int64: "int64",
            torch.bfloat16: "bfloat16"}.get(t.dtype)


class Work:
    """A user buffer seen as a flat, C-contiguous numpy array of raw elements.

    ``arr`` is a 1-D view sharing memory with the user's object (bfloat16
    tensors are viewed as int16 words); ``obj`` is the object handed back.
    """

    __slots__ = ("obj", "arr", "kind", "is_torch")

    def __init__(self, obj, arr: np.ndarray, kind: str, is_torch: bool) -> None:
        self.obj, self.arr, self.kind, self.is_torch = obj, arr, kind, is_torch


def as_work(x, argname: str, *, writable: bool) -> Work:
    """Wrap ``x`` (numpy array or CPU torch tensor) as a :class:`Work`.

    Raises
    ------
    TypeError
        If ``x`` is neither a numpy array nor a torch tensor, or has an
        unsupported dtype.
    ValueError
        If a tensor is not on the CPU, or a buffer written to is not contiguous.
    """
    if isinstance(x, np.ndarray):
        kind = _NP_KIND.get(x.dtype)
        if kind is None:
            raise TypeError(f"{argname}: unsupported dtype {x.dtype!r}; numpy arrays may be "
                            f"float32, float64 or int64 (use a torch tensor for bfloat16)")
        if not x.flags.c_contiguous:
            if writable:
                raise ValueError(f"{argname}: output array must be C-contiguous")
            x = np.ascontiguousarray(x)
        if writable and not x.flags.writeable:
            raise ValueError(f"{argname}: output array is read-only")
        return Work(x, x.reshape(-1), kind, False)
    torch = _torch()
    if torch is not None and isinstance(x, torch.Tensor):
        if x.device.type != "cpu":
            raise ValueError(f"{argname}: tensor must be on the CPU, got device {x.device}")
        kind = _torch_kind(x)
        if kind is None:
            raise TypeError(f"{argname}: unsupported dtype {x.dtype}; use float32, float64, "
                            f"bfloat16 or int64")
        t = x.detach()
        if not t.is_contiguous():
            if writable:
                raise ValueError(f"{argname}: output tensor must be contiguous")
            t = t.contiguous()
        flat = t.reshape(-1)
        arr = flat.view(torch.int16).numpy() if kind == "bfloat16" else flat.numpy()
        return Work(x, arr, kind, True)
    raise TypeError(f"{argname}: expected a numpy.ndarray or a CPU torch.Tensor, "
                    f"got {type(x).__name__}")


def empty_like(w: Work, count: int | None = None, shape=None):
    """New user-type object (array or tensor) like ``w`` with ``count`` elements."""
    if w.is_torch:
        torch = _torch()
        if count is None:
            return torch.empty_like(w.obj, memory_format=torch.contiguous_format)
        return torch.empty(count if shape is None else shape, dtype=w.obj.dtype)
    if count is None:
        return np.empty_like(w.obj, order="C")
    return np.empty(count if shape is None else shape, dtype=w.arr.dtype)


def _bf(a: np.ndarray):
    torch = _torch()
    return torch.from_numpy(a).view(torch.bfloat16)


class Reducer:
    """Elementwise ``dst = a (op) b`` on raw numpy views, plus the avg finish.

    Parameters
    ----------
    kind : str
        Element type name (a key of :data:`DTYPES`).
    op : str
        One of :data:`OPS`. ``avg`` reduces as a sum and divides by the world
        size in :meth:`finalize` (floor division for int64).
    world_size : int
        Number of contributions (divisor of ``avg``).
    """

    __slots__ = ("kind", "op", "world_size", "reduce", "_div")

    def __init__(self, kind: str, op: str, world_size: int) -> None:
        self.kind, self.op, self.world_size = kind, op, world_size
        base = "sum" if op == "avg" else op
        if kind == "bfloat16":
            torch = _torch()
            tf = {"sum": torch.add, "max": torch.maximum, "min": torch.minimum}[base]

            def reduce(dst, a, b, _f=tf):
                _f(_bf(a), _bf(b), out=_bf(dst))
        else:
            uf = {"sum": np.add, "max": np.maximum, "min": np.minimum}[base]

            def reduce(dst, a, b, _f=uf):
                _f(a, b, out=dst)
        self.reduce = reduce
        self._div = op == "avg" and world_size > 1

    def finalize(self, a: np.ndarray) -> None:
        """Turn a fully reduced sum into the average (no-op for other ops)."""
        if not self._div or a.size == 0:
            return
        if self.kind == "bfloat16":
            t = _bf(a)
            _torch().div(t, self.world_size, out=t)
        elif self.kind == "int64":
            np.floor_divide(a, self.world_size, out=a)
        else:
            np.divide(a, self.world_size, out=a)


_REDUCERS: dict[tuple, Reducer] = {}


def reducer(kind: str, op: str, world_size: int) -> Reducer:
    """Cached :class:`Reducer` for ``(kind, op, world_size)``."""
    key = (kind, op, world_size)
    r = _REDUCERS.get(key)
    if r is None:
        r = _REDUCERS[key] = Reducer(kind, op, world_size)
    return r


def partition(count: int, n: int) -> list[int]:
    """Offsets (length ``n + 1``) of ``n`` near-equal blocks of ``count`` elements.

    Block ``i`` holds ``count // n`` elements plus one when ``i < count % n``.
    """
    q, r = divmod(count, n)
    return [i * q + (i if i < r else r) for i in range(n + 1)]


#: largest scratch array of the one-segment ring kept cached between calls, in bytes
FAST_SCRATCH_BYTES = 1 << 20

_KEYVAL = None
_KEYVAL_LOCK = threading.Lock()


class Context:
    """Per-communicator state: the default transport, tag space, scratch pool.

    Stored as an MPI attribute of the communicator, so it lives and dies with it.
    """

    def __init__(self, comm: MPI.Comm) -> None:
        self.comm = comm
        self.transport = Transport(comm)
        self._lock = threading.Lock()
        self._pool: list[np.ndarray] = []
        #: scratch arrays of the small-message fast path, by (dtype char, count)
        self.fast_scratch: dict[tuple, np.ndarray] = {}
        self._groups: list[list[int]] | None = None
        try:
            tag_ub = comm.Get_attr(MPI.TAG_UB)
        except MPI.Exception:  # pragma: no cover
            tag_ub = None
        self.tag_ub = int(tag_ub) if tag_ub else MIN_TAG_UB
        #: the communicator's tag space, shared by the dense and compressed collectives
        self.tags = TagSpace(self.tag_ub)
        #: persistent plans of the small blocking allreduces
        self.plans = PlanCache(comm)
        #: tagged plans of the small nonblocking allreduces, and the last such call's
        #: ``(x, out, op, algorithm, deterministic, dtype, key)``
        self.nb_plans = PlanCache(comm)
        self.nb_last: tuple | None = None
        #: the same for unnamed nonblocking calls (slot plans), and their tag slots
        self.slot_plans = PlanCache(comm)
        self.slot_last: tuple | None = None
        self.slots = SlotPool(self.tags.slots)

    def tag(self, name: str | None) -> int:
        """Dense-family tag of the next operation called ``name`` (``None``: unnamed).

        See :meth:`hpcbench.collectives.tags.TagSpace.named`: a CRC-32 hash of
        ``name`` and of how many operations of that name this rank has started,
        inside the dense range, which no compressed collective ever uses.
        """
        return self.tags.named(name)

    def borrow(self, nbytes: int) -> np.ndarray:
        """A scratch byte array of at least ``nbytes`` (give it back with :meth:`give`)."""
        with self._lock:
            for i, buf in enumerate(self._pool):
                if buf.nbytes >= nbytes:
                    return self._pool.pop(i)
        return np.empty(max(nbytes, 64), dtype=np.uint8)

    def give(self, buf: np.ndarray) -> None:
        """Return a scratch array to the pool."""
        with self._lock:
            if len(self._pool) < 8:
                self._pool.append(buf)
                self._pool.sort(key=lambda b: b.nbytes)

    def take_scratch(self, dtype: np.dtype, count: int) -> np.ndarray:
        """A ``count``-element ``dtype`` scratch array of the one-segment ring (:func:`ring_single`).

        Cached per ``(dtype, count)`` between calls (:meth:`keep_scratch` gives it
        back), so a blocking allreduce repeated on buffers of one size allocates
        nothing; taking removes it from the cache, so two threads never share one.

        Parameters
        ----------
        dtype : numpy.dtype
            Element type of the array (a ``numpy.dtype`` instance: the cache is
            keyed by ``dtype.char``).
        count : int
            Number of elements.

        Returns
        -------
        numpy.ndarray
            1-D array of shape ``(count,)`` and dtype ``dtype``, owned by the
            caller until given back. Its contents are undefined (a fresh
            ``numpy.empty`` or a cached array still holding earlier data).
        """
        tmp = self.fast_scratch.pop((dtype.char, count), None)
        return np.empty(count, dtype=dtype) if tmp is None else tmp

    def keep_scratch(self, tmp: np.ndarray) -> None:
        """Give back an array of :meth:`take_scratch` (kept if at most 1 MiB and 16 cached).

        Parameters
        ----------
        tmp : numpy.ndarray
            1-D array from :meth:`take_scratch`; the caller must not use it
            afterwards. It is cached under ``(tmp.dtype.char, tmp.size)``,
            replacing any array cached under that key, if it is at most
            :data:`FAST_SCRATCH_BYTES` (1 MiB) and fewer than 16 arrays are
            cached; otherwise it is dropped.
        """
        if len(self.fast_scratch) < 16 and tmp.nbytes <= FAST_SCRATCH_BYTES:
            self.fast_scratch[(tmp.dtype.char, tmp.size)] = tmp

    def host_groups(self) -> list[list[int]]:
        """Ranks grouped by host name, groups ordered by their lowest rank.

        Collective over the communicator on first use (an ``allgather`` of
        host names; metadata only, no payload).
        """
        if self._groups is None:
            from hpcbench.runtime.hosts import host_groups

            self._groups = host_groups(self.comm)
        return self._groups


def context_for(comm: MPI.Comm) -> Context:
    """The :class:`Context` of ``comm`` (created on first use)."""
    global _KEYVAL
    if _KEYVAL is None:
        with _KEYVAL_LOCK:
            if _KEYVAL is None:
                _KEYVAL = MPI.Comm.Create_keyval()
    ctx = comm.Get_attr(_KEYVAL)
    if ctx is None:
        ctx = Context(comm)
        comm.Set_attr(_KEYVAL, ctx)
    return ctx


def scratch_view(buf: np.ndarray, dtype: np.dtype, count: int) -> np.ndarray:
    """First ``count`` elements of byte array ``buf`` viewed as ``dtype``."""
    return buf[:count * dtype.itemsize].view(dtype)


def inline_backoff(nbytes: int = 0) -> TwoPhaseBackoff:
    """Wait schedule of blocking calls and of ``Request.wait``: polls back to back for as
    long as a sleep is measured to cost on this node, and at least as long as the
    operation's ``nbytes`` take to move (at 100 MB/s above 1 MiB; two-phase waiting,
    :mod:`hpcbench.collectives.waiting`), then sleeps from 20 us doubling to 1 ms (an
    oversubscribed rank that waits long costs no CPU)."""
    return TwoPhaseBackoff(first_s=2e-5, max_s=1e-3, nbytes=nbytes)


def wait_inline(reqs, bo: Backoff) -> None:
    """Complete every request of ``reqs`` in the calling thread (``bo`` is reset after).

    Every pass polls all pending requests, this rank's sends included, before
    it sleeps: a send's MPI part (a link-model arrival header, a queued
    eager message) may need the sender's own progress call to leave, and a
    peer waiting for it would otherwise oversleep (measured over the link
    model: a Rabenseifner step took one whole message time more whenever a
    rank slept on its receive with its send's header still queued). Sleeps
    till the earliest :func:`next_poll` time when every pending request has
    one, else pauses with ``bo``.
    """
    pending = [r for r in reqs if not r.test()]
    if not pending:
        return
    while pending:
        now = time.monotonic()
        wake = None
        for r in pending:
            t = next_poll(r, now)
            if t is None:
                wake = None
                break
            wake = t if wake is None or t < wake else wake
        if wake is None:
            bo.pause()
        else:                   # nothing can happen before wake: sleep till then
            time.sleep(max(0.0, wake - now))
        left = [r for r in pending if not r.test()]
        if len(left) < len(pending):
            bo.reset()
        pending = left
    bo.reset()


def run_inline(gen, backoff: Backoff | None = None, nbytes: int = 0) -> None:
    """Drive an algorithm generator to completion in the calling thread.

    The generator yields lists of :class:`P2PRequest`; each list is waited
    for (:func:`wait_inline`, :func:`inline_backoff`: spin for the cost of a
    sleep, or for the time the operation's ``nbytes`` take to move, then
    growing sleeps) before the generator resumes.
    """
    bo = backoff or inline_backoff(nbytes)
    for reqs in gen:
        wait_inline(reqs, bo)


def next_poll(req, now: float) -> float | None:
    """When to poll pending ``req`` next, if it is worth sleeping till then; None: poll
    with the backoff (plain MPI requests, or bytes still moving through MPI).

    The :func:`not_before` bound, except for a link-model receive whose arrival
    stamp has not come (``req.ready_at is None``): half way to that bound. The
    bound assumes the sender has not posted yet, but a posted header can sit
    in the sender's MPI queue until the sender next polls; waking half way
    caps what a late-delivered header costs at half a message time.
    """
    t = not_before(req, now)
    if t is not None and t > now and getattr(req, "ready_at", 0.0) is None:
        return now + 0.5 * (t - now)
    return t


def not_before(req, now: float) -> float | None:
    """Earliest ``time.monotonic()`` at which pending ``req`` can complete, when that is
    known without polling MPI; None otherwise.

    Link-model requests know it while only modelled wire time is left, or while
    the message has not been sent (see
    :meth:`hpcbench.collectives.linkmodel.LinkRequest.not_before`); plain MPI
    requests return None (they need polling to progress). Call after a
    ``test()`` that returned False.
    """
    f = getattr(req, "not_before", None)
    return None if f is None else f(now)


def waitable(reqs: list[P2PRequest]) -> list[P2PRequest]:
    """Requests still pending among ``reqs`` (helper for algorithms)."""
    return [r for r in reqs if not r.test()]


def is_inplace(src: np.ndarray, dst: np.ndarray) -> bool:
    """True when ``src`` and ``dst`` are the same memory."""
    if src is dst:
        return True
    if src.size != dst.size or src.size == 0 or not np.may_share_memory(src, dst):
        return False        # the common out-of-place case, without building interface dicts
    return src.__array_interface__["data"][0] == dst.__array_interface__["data"][0]


def start_allreduce(tr, src: np.ndarray, dst: np.ndarray, red) -> bool:
    """Opening shared by the allreduce algorithms.

    Copies ``src`` into ``dst`` unless in place; returns True, with ``dst``
    finalized (``avg`` divides), when there is nothing to exchange (one rank
    or no elements).
    """
    if not is_inplace(src, dst):
        dst[...] = src
    if tr.world_size == 1 or dst.size == 0:
        red.finalize(dst)
        return True
    return False


def _unused(*_: Any) -> None:  # pragma: no cover
    pass

"""Public collectives: allreduce (by algorithm), reduce_scatter, allgather, bcast,
and their nonblocking forms.

Every function here is collective: it must be called by all ranks of ``comm``
(or of ``transport.comm``), in the same order for operations of the same
``name``, with the same ``count``, dtype, ``op``, ``algorithm`` and ``root``.

Buffers are numpy arrays (float32, float64, int64) or CPU torch tensors
(float32, float64, bfloat16, int64). Bytes travel only through a
:class:`~hpcbench.collectives.transport.Transport` (``transport=``, or one
built once per communicator), so a link-model transport plugs in unchanged.

Tags: each operation gets one MPI tag from the communicator's tag space
(:class:`hpcbench.collectives.tags.TagSpace`): a CRC-32 hash of its ``name``
(or of ``""`` for unnamed calls) and of how many operations of that name this
rank has started, inside the ``dense`` range, which the compressed collectives
(:mod:`hpcbench.collectives.compressed`, ``compressed`` range) never use.
Within one operation, every pair of ranks exchanges its messages in program
order, so MPI's non-overtaking rule matches them; different outstanding
operations have different tags (up to hash collisions between names) and
never mix. The exception: unnamed *blocking* allreduces over the plain
transport all use the communicator's one ``blocking`` tag and are matched by
call order, as MPI's own blocking collectives (so two threads must not run
them on one communicator at once); that lets small ones run as persistent
plans (:mod:`hpcbench.collectives.persistent`). And unnamed *nonblocking*
allreduces of small numpy buffers take their tags from a family of
:data:`~hpcbench.collectives.tags.SLOTS` slots in call order
(:mod:`hpcbench.collectives.slots`), so their persistent requests are
replayed too; ranks must then pass numpy arrays on every rank or on none.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np
from mpi4py import MPI

from hpcbench.collectives import algorithms as _alg
from hpcbench.collectives._core import (OPS, as_work, context_for, empty_like, partition,
                                        reducer, run_inline, scratch_view)
from hpcbench.collectives.algorithms._shapes import tree_bcast
from hpcbench.collectives.algorithms.ring import ring_phases
from hpcbench.collectives.persistent import PLAN_MAX_BYTES, Plan, SlotPlan, TaggedPlan, sweep_freed
from hpcbench.collectives.planned import PlannedRequest, SlotRequest
from hpcbench.collectives.progress import Request, submit
from hpcbench.collectives.transport import Transport
from hpcbench.runtime.chunked import eager_bytes

__all__ = ["allreduce", "iallreduce", "reduce_scatter", "ireduce_scatter", "allgather",
           "iallgather", "bcast", "ibcast", "choose_algorithm", "CROSSOVER", "Request"]

#: ``auto`` crossover points, in bytes, measured with
#: ``mpiexec -n 2 python -m hpcbench.collectives.bench -b 8 -e 64M -f 4`` on a
#: 2-core node (see docs/collectives.md): below ``small`` (whole buffer), and
#: at most ``eager`` (the MPI library's eager limit, ``HPCBENCH_EAGER_BYTES``,
#: read at import), recursive doubling (latency-optimal); the ring once each
#: rank's block of the buffer (``nbytes / world_size``) reaches ``medium / 2`` (at
#: 2 ranks: above ``eager``); Rabenseifner in between.
CROSSOVER = {"small": 16 << 10, "medium": 256 << 10, "eager": eager_bytes()}


def choose_algorithm(nbytes: int, world_size: int, deterministic: bool = False,
                     hosts: Sequence[int] | None = None) -> str:
    """The algorithm ``"auto"`` uses for a ``nbytes`` buffer on ``world_size`` ranks.

    Below ``CROSSOVER["small"]`` bytes, and at most ``CROSSOVER["eager"]``:
    recursive doubling (``tree`` when ``deterministic``), ``log2 p``
    full-vector steps. A full vector above the MPI library's eager limit goes
    by rendezvous, a handshake that needs both ranks inside MPI; with ranks
    drifting out of step (calls back to back, no barrier) and waiting ranks
    sleeping, recursive doubling of 8-12 KiB at 4 ranks on 2 cores took
    13-26x MPI's time per call, against 1.1-1.2x just below the limit
    (``scripts/allreduce_percall.py``, docs/collectives.md, "Small messages at
    4 ranks: per-call overhead"); Rabenseifner's and the ring's messages are
    a half to a ``p``-th of the vector. Above: the ring once the
    block each rank owns, ``nbytes / world_size``, is at least
    ``CROSSOVER["medium"] / 2``, else Rabenseifner. Both send ``2 (p-1)/p``
    of the buffer per rank, but the ring takes ``2 (p-1)`` latency steps
    against Rabenseifner's ``2 log2 p`` (Thakur, Rabenseifner and Gropp 2005;
    Patarasuk and Yuan 2009), so the ring needs larger blocks to pay off as
    ``p`` grows. At ``p = 2`` the two send the same messages (one exchange
    of half the buffer each way, then one back), and the ring is taken: its
    one-segment form has less Python per step. Small blocking calls of all three
    run as persistent plans (Rabenseifner's and recursive doubling's where ``p``
    is a power of two).

    Across hosts (``hosts``: more than one, each with at least two ranks),
    above the small-message rule: ``hierarchical``. Inside a host ranks talk
    through shared memory and between hosts through the network, many times
    slower; the hierarchical allreduce sends ``2 (G-1)/G m/L`` bytes per rank
    over the network (``G`` hosts of ``L`` ranks) where the ring sends
    ``2 (p-1)/p m`` and every ring step waits for a message crossing hosts
    (the two-level model, :func:`hpcbench.collectives.linkcost.predict_allreduce_hosts`).

    Parameters
    ----------
    nbytes : int
        Size of each rank's buffer in bytes.
    world_size : int
        World size (>= 1).
    deterministic : bool
        Restrict the choice to algorithms that reduce each element at one rank.
    hosts : sequence of int, optional
        Ranks on each host (the communicator's host groups); None: not known
        (chosen as for one host).

    Returns
    -------
    str
        A registered algorithm name.

    Raises
    ------
    ValueError
        ``world_size`` < 1 or ``nbytes`` < 0.
    """
    if world_size < 1 or nbytes < 0:
        raise ValueError(f"choose_algorithm: need world_size >= 1 and nbytes >= 0, "
                         f"got world_size={world_size!r}, nbytes={nbytes!r}")
    if nbytes < CROSSOVER["small"] and nbytes <= CROSSOVER["eager"]:
        return "tree" if deterministic else "recursive_doubling"
    if hosts is not None and len(hosts) > 1 and min(hosts) > 1 and sum(hosts) == world_size:
        return "hierarchical"
    if world_size == 2 or 2 * nbytes >= CROSSOVER["medium"] * world_size:
        return "ring"
    return "rabenseifner"


def _auto(nbytes: int, tr, ctx, deterministic: bool) -> str:
    """:func:`choose_algorithm` for a call: the host layout is asked for (collective, once per communicator:
    :meth:`~hpcbench.collectives._core.Context.host_groups`) only where the size could use it."""
    hosts = None
    if tr.world_size >= 4 and not (nbytes < CROSSOVER["small"] and nbytes <= CROSSOVER["eager"]):
        hosts = [len(g) for g in ctx.host_groups()]
    return choose_algorithm(nbytes, tr.world_size, deterministic, hosts)


#: ``(comm, context)`` of the last communicator resolved (``None`` stands for the world),
#: so that repeated calls skip the attribute lookup; one tuple, read and replaced whole
_LAST: tuple = (object(), None)


def _resolve(comm, transport):
    global _LAST
    if transport is None:
        last = _LAST
        if comm is last[0]:
            ctx = last[1]
            return ctx, ctx.transport
        c = MPI.COMM_WORLD if comm is None else comm
        if not isinstance(c, MPI.Comm):
            raise TypeError(f"comm: expected an mpi4py.MPI.Comm, got {type(c).__name__}")
        ctx = context_for(c)
        _LAST = (comm, ctx)
        return ctx, ctx.transport
    if not isinstance(transport, Transport):
        raise TypeError(f"transport: expected a Transport, got {type(transport).__name__}")
    if comm is not None and comm != transport.comm:
        raise ValueError("comm: differs from transport.comm; pass one of them")
    return context_for(transport.comm), transport


def _check_op(op):
    if op not in OPS:
        raise ValueError(f"op: unknown reduction {op!r}; choose from {', '.join(OPS)}")


def _out(w, out, count, argname="out", shape=None):
    if out is None:
        return as_work(empty_like(w, count, shape) if count is not None else empty_like(w),
                       argname, writable=True)
    o = as_work(out, argname, writable=True)
    if o.kind != w.kind:
        raise TypeError(f"{argname}: dtype {o.kind} differs from the input's {w.kind}")
    want = w.arr.size if count is None else count
    if o.arr.size != want:
        raise ValueError(f"{argname}: has {o.arr.size} elements, expected {want}")
    return o


def _allreduce_gen(x, out, op, algorithm, deterministic, comm, transport, name, local_size,
                   tag=None, weights=None):
    _check_op(op)
    ctx, tr = _resolve(comm, transport)
    w = as_work(x, "x", writable=out is x)
    o = w if out is x else _out(w, out, None)
    src, dst = w.arr, o.arr
    if algorithm == "auto":
        algorithm = _auto(dst.nbytes, tr, ctx, deterministic)
    if not isinstance(algorithm, str):
        raise TypeError(f"algorithm: expected a name, got {type(algorithm).__name__}")
    alg = _alg.get(algorithm)
    if deterministic and not alg.deterministic:
        raise ValueError(f"algorithm: {algorithm!r} reduces on every rank; with "
                         f"deterministic=True use one of "
                         f"{[a for a in _alg.names() if _alg.get(a).deterministic]}")
    if local_size is not None and (not isinstance(local_size, int) or local_size < 1):
        raise ValueError(f"local_size: must be a positive int, got {local_size!r}")
    if weights is not None:       # an option the algorithm declares, checked before any message
        _alg.check_options(alg, {"weights": weights}, tr.world_size)
    if tag is None:
        tag = ctx.tag(name)
    red = reducer(w.kind, op, tr.world_size)
    gen = alg.fn(tr, tag, src, dst, red, ctx, local_size=local_size, weights=weights)
    return gen, o.obj, dst.nbytes


def allreduce(x, out=None, *, op: str = "sum", algorithm: str = "auto",
              deterministic: bool = False, comm: MPI.Comm | None = None,
              transport: Transport | None = None, name: str | None = None,
              local_size: int | None = None, weights=None):
    """Reduce ``x`` over all ranks and give every rank the result.

    Must be called by all ranks of ``comm`` with the same count, dtype, ``op``
    and ``algorithm``.

    Parameters
    ----------
    x : numpy.ndarray or torch.Tensor, any shape, ``count`` elements
        This rank's contribution: numpy float32/float64/int64 or CPU torch
        float32/float64/bfloat16/int64 (bfloat16 moves as raw 2-byte words
        and is reduced with torch). Not modified unless ``out is x``.
    out : same type, shape and dtype as ``x``, optional
        Where to write the result; ``out is x`` reduces in place. A new
        array/tensor is returned when omitted.
    op : {"sum", "avg", "max", "min"}
        Reduction. ``avg`` is the sum divided by the world size (floor
        division for int64).
    algorithm : str
        ``"ring"``, ``"rabenseifner"``, ``"recursive_doubling"``, ``"tree"``,
        ``"star"``, ``"binary_tree_star"``, ``"weighted_shards"`` or ``"auto"`` (by message size, see
        :func:`choose_algorithm`; measured crossovers in :data:`CROSSOVER`).
    deterministic : bool
        Guarantee float results bitwise identical on every rank and from run
        to run: only algorithms where each element is reduced at exactly one
        rank, in an order fixed by rank numbers, and the reduced bytes are
        then copied to the others (ring, rabenseifner, tree, star,
        binary_tree_star, weighted_shards) are allowed. All of them already combine in a fixed
        order, so the flag restricts the choice and costs nothing more.
    comm : mpi4py.MPI.Comm, optional
        Communicator (default ``MPI.COMM_WORLD``); ignored when ``transport``
        is given (it must then be ``transport.comm`` or None).
    transport : Transport, optional
        Point-to-point layer carrying the bytes (e.g. a link model).
    name : str, optional
        Operation name; selects the tag (see module docstring).
    local_size : int, optional
        ``binary_tree_star`` only: ranks per group (default: per host).
    weights : sequence of float, optional
        ``weighted_shards`` only: each rank's relative shard size (one per
        rank, >= 0, positive sum, the same on every rank; default equal), e.g.
        :func:`~hpcbench.collectives.algorithms.weighted_shards.shard_weights`
        of the links' seconds per byte.

    Returns
    -------
    numpy.ndarray or torch.Tensor
        ``out`` (or the new object), holding the reduction.

    Raises
    ------
    TypeError
        Unsupported buffer type or dtype, ``out`` of another dtype.
    ValueError
        Unknown ``op`` or ``algorithm``, ``out`` of another size, a
        non-contiguous ``out``, a non-CPU tensor, a non-deterministic
        algorithm with ``deterministic=True``, ``weights`` for another
        algorithm or not one per rank.
    """
    tag = None
    if name is None and weights is None and (transport is None or type(transport) is Transport):
        ctx, tr = _resolve(comm, transport)
        tag = ctx.tags.blocking     # matched by call order, whichever path runs it
        if type(x) is np.ndarray:
            result = _allreduce_planned(x, out, op, algorithm, deterministic, ctx, tr)
            if result is not None:
                return result
    gen, result, nbytes = _allreduce_gen(x, out, op, algorithm, deterministic, comm, transport,
                                         name, local_size, tag, weights)
    run_inline(gen, nbytes=nbytes)
    return result


# -- persistent plans (small blocking calls) ------------------------------------------------

_PLAN_UFUNC = {"sum": np.add, "avg": np.add, "max": np.maximum, "min": np.minimum}
_PLAN_DTYPES = (np.dtype(np.float32), np.dtype(np.float64), np.dtype(np.int64))


def _allreduce_planned(x, out, op, algorithm, deterministic, ctx, tr):
    """Blocking allreduce of numpy ``x`` by a persistent plan
    (:mod:`hpcbench.collectives.persistent`); None when the call does not
    qualify (the generator then runs, on the same blocking tag, and reports any
    bad argument).

    ``auto`` is resolved first (:func:`choose_algorithm`), so a change of
    :data:`CROSSOVER` never replays a plan of the algorithm it used to pick.
    Plans are keyed by the resolved algorithm, op, dtype (byte order
    included), count and the addresses of the input and output; without
    ``out`` the plan owns its output array and the caller gets a copy. A key
    is only ever stored after the checks of a first call passed, so a hit
    checks only what the key does not say (layout and type of ``out``). A
    call on the very arrays of the last one, unchanged in dtype and size,
    finds its plan by identity
    (:attr:`~hpcbench.collectives.persistent.PlanCache.last`, which holds
    those arrays: numpy then refuses to ``resize`` them in place).
    """
    if algorithm == "auto":
        algorithm = _auto(x.nbytes, tr, ctx, deterministic)
    plans = ctx.plans
    last = plans.last
    if (last is not None and last[0] is x and last[1] is out and last[2] == op
            and last[3] == algorithm and last[4] == deterministic and x.dtype is last[5]
            and x.size == last[6][4] and x.flags.c_contiguous
            and (out is None or out.flags.writeable)):
        plan = last[7]
        plans.last = None                   # taken while it runs
        _run(plan)
        plans.last = last
    else:
        if not x.flags.c_contiguous or not isinstance(algorithm, str):
            return None
        dt = x.dtype
        count = x.size
        a_src = MPI.buffer(x).address
        if out is None:
            a_dst = -1
        elif (type(out) is np.ndarray and out.dtype == dt and out.size == count
              and out.flags.c_contiguous and out.flags.writeable):
            a_dst = a_src if out is x else MPI.buffer(out).address
        else:
            return None
        key = (algorithm, op, deterministic, dt.str, count, a_src, a_dst)
        plan = plans.take(key)
        if plan is None:
            plan = _new_plan(x, out, op, algorithm, deterministic, ctx, tr, a_src, a_dst)
            if plan is None:
                return None
        _run(plan)
        plans.keep(key, plan, (x, out, op, algorithm, deterministic, dt))
    if out is None:         # the plan's own output is overwritten by its next run
        return plan.result.reshape(x.shape).copy()
    return out


def _run(plan) -> None:
    """Run a plan taken out of its cache; if the run raises (an MPI error, a signal's
    exception, a ufunc error under ``np.errstate``), free its requests and re-raise."""
    try:
        plan.run()
    except BaseException:
        plan.free()
        raise


def _new_plan(x, out, op, algorithm, deterministic, ctx, tr, a_src, a_dst, tagged=False):
    """The plan of a call that :func:`_allreduce_planned` (``tagged``:
    :func:`_iallreduce_planned`) has not seen, or None."""
    n, dt = tr.world_size, x.dtype
    uf = _PLAN_UFUNC.get(op)
    if (uf is None or dt not in _PLAN_DTYPES or n == 1 or x.size == 0
            or x.nbytes > PLAN_MAX_BYTES):
        return None
    alg = _alg.find(algorithm)
    if alg is None or alg.schedule is None or (deterministic and not alg.deterministic):
        return None
    if a_dst not in (-1, a_src) and a_src < a_dst + x.nbytes and a_dst < a_src + x.nbytes:
        return None         # partial overlap: the generator's business
    src = x.reshape(-1)
    sched = alg.schedule(n, tr.rank, src.size, dt.itemsize, a_src == a_dst)
    if sched is None:
        return None
    sweep_freed()
    if a_dst == -1:
        dst, own = np.empty(src.size, dtype=dt), True
    else:
        dst, own = (src if a_dst == a_src else out.reshape(-1)), False
    if tagged:
        return TaggedPlan(tr, sched, src, dst, uf, n if op == "avg" else 0)
    return Plan(tr, ctx.tags.blocking, sched, src, dst, uf, n if op == "avg" else 0,
                own_dst=own)


def iallreduce(x, out=None, *, op: str = "sum", algorithm: str = "auto",
               deterministic: bool = False, comm: MPI.Comm | None = None,
               transport: Transport | None = None, name: str | None = None,
               local_size: int | None = None, weights=None) -> Request:
    """Nonblocking :func:`allreduce`; returns a :class:`Request`.

    Must be called by all ranks of ``comm``. Parameters, errors and result as
    :func:`allreduce` (``Request.wait()`` returns the result). Do not touch
    ``x`` or ``out`` until the request completes. Progress is made by a
    background thread while the caller computes (see
    :mod:`hpcbench.collectives.progress`); any number of requests may be
    outstanding and complete in any order; give each concurrent one a
    distinct ``name`` when ranks may start them in different orders.
    """
    if type(x) is np.ndarray and weights is None and (
            transport is None or type(transport) is Transport):
        if name is None and (out is None or type(out) is np.ndarray):
            req = _iallreduce_slotted(x, out, op, algorithm, deterministic, comm, transport)
            if req is not None:
                return req
        elif type(out) is np.ndarray:
            req = _iallreduce_planned(x, out, op, algorithm, deterministic, comm, transport, name)
            if req is not None:
                return req
    gen, result, nbytes = _allreduce_gen(x, out, op, algorithm, deterministic, comm, transport,
                                         name, local_size, weights=weights)
    return submit(Request(gen, result, name, nbytes))


def _iallreduce_planned(x, out, op, algorithm, deterministic, comm, transport, name):
    """Nonblocking allreduce of numpy ``x`` into numpy ``out`` by a
    :class:`~hpcbench.collectives.persistent.TaggedPlan` (the schedule bound to the
    buffers once, messages posted per call with the call's tag), run by a
    :class:`~hpcbench.collectives.planned.PlannedRequest`; None when the
    call does not qualify (the generator then runs, and reports any bad argument).

    The same conditions as :func:`_allreduce_planned` and an ``out`` given (a
    plan-owned output could be shared by two outstanding calls); plans are kept
    in the communicator's ``nb_plans`` cache and taken out while their request
    is outstanding. The tag is the one the generator would use
    (:meth:`~hpcbench.collectives._core.Context.tag`), so ranks taking either
    path exchange the same messages.
    """
    ctx, tr = _resolve(comm, transport)
    last = ctx.nb_last
    if (last is not None and last[0] is x and last[1] is out and last[2] == op
            and last[3] == algorithm and last[4] == deterministic and x.dtype is last[5]
            and x.size == last[6][4] and x.flags.c_contiguous and out.flags.writeable):
        key = last[6]               # the arrays of the last call: its key, found by identity
    else:
        alg = choose_algorithm(x.nbytes, tr.world_size, deterministic) if algorithm == "auto" \
            else algorithm
        dt = x.dtype
        if (not isinstance(alg, str) or not x.flags.c_contiguous or out.dtype != dt
                or out.size != x.size or not out.flags.c_contiguous or not out.flags.writeable):
            return None
        a_src = MPI.buffer(x).address
        a_dst = a_src if out is x else MPI.buffer(out).address
        key = (alg, op, deterministic, dt.str, x.size, a_src, a_dst)
    plans = ctx.nb_plans
    plan = plans.take(key)
    if plan is None:
        plan = _new_plan(x, out, op, key[0], deterministic, ctx, tr, key[5], key[6], tagged=True)
        if plan is None:
            return None
    ctx.nb_last = (x, out, op, algorithm, deterministic, x.dtype, key)
    return submit(PlannedRequest(plan, ctx.tag(name), plans, key, out, name))


def _iallreduce_slotted(x, out, op, algorithm, deterministic, comm, transport):
    """Unnamed nonblocking allreduce of numpy ``x`` by a slot's persistent requests
    (:mod:`hpcbench.collectives.slots`, :class:`~hpcbench.collectives.persistent.SlotPlan`),
    run by a :class:`~hpcbench.collectives.planned.SlotRequest`; None when the call does
    not qualify (the other paths then run it, on a dense tag).

    Every rank must take a call to the same path (they must agree on its slot),
    so whether it qualifies depends only on what the ranks share by contract:
    the algorithm, op, dtype, count and world size (a schedule exists for them,
    :data:`PLAN_MAX_BYTES` at most), and numpy buffers; not on the arrays'
    layout. A non-contiguous ``x``, or one partly overlapping ``out``, is
    copied (that call builds a plan of its own); without ``out`` a new array
    is the output. Plans are keyed as in :func:`_iallreduce_planned` and kept
    in the communicator's ``slot_plans`` cache, taken out while their call is
    outstanding.
    """
    ctx, tr = _resolve(comm, transport)
    last = ctx.slot_last
    keep = None
    if (out is not None and last is not None and last[0] is x and last[1] is out
            and last[2] == op and last[3] == algorithm and last[4] == deterministic
            and x.dtype is last[5] and x.size == last[6][4] and x.flags.c_contiguous
            and out.flags.writeable):
        key, src = last[6], x       # the arrays of the last call: its key, found by identity
        hit = True
    else:
        hit = False
        n, dt = tr.world_size, x.dtype
        alg = choose_algorithm(x.nbytes, n, deterministic) if algorithm == "auto" else algorithm
        a = _alg.find(alg) if isinstance(alg, str) else None
        if (a is None or a.schedule is None or (deterministic and not a.deterministic)
                or op not in _PLAN_UFUNC or dt not in _PLAN_DTYPES or n == 1 or x.size == 0
                or x.nbytes > PLAN_MAX_BYTES):
            return None
        if out is None:
            out = np.empty(x.shape, dtype=dt)
        elif (out.dtype != dt or out.size != x.size or not out.flags.c_contiguous
              or not out.flags.writeable):
            _out(as_work(x, "x", writable=False), out, None)    # raises what the generator would
            return None
        src = x
        a_dst = MPI.buffer(out).address
        if x.flags.c_contiguous:
            a_src = MPI.buffer(x).address
            if a_src != a_dst and a_src < a_dst + out.nbytes and a_dst < a_src + x.nbytes:
                src = None          # partly overlapping
        else:
            src = None
        if src is None:
            src = keep = np.ascontiguousarray(x).copy()
            a_src = MPI.buffer(src).address
        key = (alg, op, deterministic, dt.str, x.size, a_src, a_dst)
    plans = ctx.slot_plans
    plan = plans.take(key)
    if plan is None:
        sched = _alg.find(key[0]).schedule(tr.world_size, tr.rank, x.size, x.dtype.itemsize,
                                             key[5] == key[6])
        if sched is None:       # depends on the world size, count and itemsize only
            return None
        sweep_freed()
        dst = src.reshape(-1) if key[5] == key[6] else out.reshape(-1)
        plan = SlotPlan(tr, sched, src.reshape(-1), dst, _PLAN_UFUNC[op],
                        tr.world_size if op == "avg" else 0)
    if keep is None and not hit:    # a hit leaves ctx.slot_last as it is: the same call
        ctx.slot_last = (x, out, op, algorithm, deterministic, x.dtype, key)
    return submit(ctx.slots.take(SlotRequest, plan, plans, key, out, None, keep))


# -- reduce_scatter -----------------------------------------------------------------------

def _reduce_scatter_gen(x, out, op, comm, transport, name):
    _check_op(op)
    ctx, tr = _resolve(comm, transport)
    w = as_work(x, "x", writable=False)
    n, r = tr.world_size, tr.rank
    bounds = partition(w.arr.size, n)
    mine = bounds[r + 1] - bounds[r]
    o = _out(w, out, mine)
    tag = ctx.tag(name)
    red = reducer(w.kind, op, n)

    def gen():
        src = w.arr
        if n == 1:
            o.arr[...] = src
            red.finalize(o.arr)
            return
        buf = ctx.borrow(src.nbytes)
        try:
            work = scratch_view(buf, src.dtype, src.size)
            yield from ring_phases(tr, tag, src, work, red, ctx, bounds, allgather=False)
            o.arr[...] = work[bounds[r]:bounds[r + 1]]
        finally:
            ctx.give(buf)
    return gen(), o.obj, w.arr.nbytes


def reduce_scatter(x, out=None, *, op: str = "sum", comm: MPI.Comm | None = None,
                   transport: Transport | None = None, name: str | None = None):
    """Reduce ``x`` over all ranks; rank ``r`` gets block ``r`` of the result.

    Must be called by all ranks of ``comm`` with the same count, dtype and op.
    Ring reduce-scatter (first phase of Patarasuk and Yuan 2009), pipelined:
    ``(n-1)/n * bytes`` sent per rank.

    Parameters
    ----------
    x : numpy.ndarray or torch.Tensor, ``count`` elements (flattened)
        This rank's full-length contribution (dtypes as :func:`allreduce`).
    out : 1-D array or tensor of ``block(r)`` elements, optional
        Block ``r`` has ``count // n`` elements, plus one when
        ``r < count % n`` (blocks in rank order).
    op : {"sum", "avg", "max", "min"}

    Returns
    -------
    1-D numpy.ndarray or torch.Tensor
        This rank's reduced block.

    Raises
    ------
    TypeError, ValueError
        As :func:`allreduce`; ``out`` of the wrong size.
    """
    gen, result, nbytes = _reduce_scatter_gen(x, out, op, comm, transport, name)
    run_inline(gen, nbytes=nbytes)
    return result


def ireduce_scatter(x, out=None, *, op: str = "sum", comm: MPI.Comm | None = None,
                    transport: Transport | None = None, name: str | None = None) -> Request:
    """Nonblocking :func:`reduce_scatter`; returns a :class:`Request`.

    Must be called by all ranks of ``comm``.
    """
    gen, result, nbytes = _reduce_scatter_gen(x, out, op, comm, transport, name)
    return submit(Request(gen, result, name, nbytes))


# -- allgather ----------------------------------------------------------------------------

def _allgather_gen(x, out, comm, transport, name):
    ctx, tr = _resolve(comm, transport)
    w = as_work(x, "x", writable=False)
    n, r = tr.world_size, tr.rank
    m = w.arr.size
    shape = (n, *tuple(w.obj.shape))
    o = _out(w, out, n * m, shape=shape)
    tag = ctx.tag(name)
    bounds = [i * m for i in range(n + 1)]

    def gen():
        dst = o.arr
        dst[bounds[r]:bounds[r + 1]] = w.arr
        if n > 1 and m > 0:
            yield from ring_phases(tr, tag, dst, dst, None, ctx, bounds, reduce_scatter=False)
    return gen(), o.obj, o.arr.nbytes


def allgather(x, out=None, *, comm: MPI.Comm | None = None, transport: Transport | None = None,
              name: str | None = None):
    """Gather every rank's ``x`` on every rank, in rank order.

    Must be called by all ranks of ``comm``, each with the same count and
    dtype. Ring allgather: ``n - 1`` steps, ``(n-1)/n`` of the output sent per
    rank.

    Parameters
    ----------
    x : numpy.ndarray or torch.Tensor, ``m`` elements
    out : array or tensor of ``n * m`` elements, optional
        Default: new, of shape ``(n, *x.shape)``.

    Returns
    -------
    numpy.ndarray or torch.Tensor
        Row ``i`` (block ``i``) holds rank ``i``'s ``x``.

    Raises
    ------
    TypeError, ValueError
        As :func:`allreduce`; ``out`` of the wrong size.
    """
    gen, result, nbytes = _allgather_gen(x, out, comm, transport, name)
    run_inline(gen, nbytes=nbytes)
    return result


def iallgather(x, out=None, *, comm: MPI.Comm | None = None, transport: Transport | None = None,
               name: str | None = None) -> Request:
    """Nonblocking :func:`allgather`; returns a :class:`Request`.

    Must be called by all ranks of ``comm``.
    """
    gen, result, nbytes = _allgather_gen(x, out, comm, transport, name)
    return submit(Request(gen, result, name, nbytes))


# -- bcast --------------------------------------------------------------------------------

def _bcast_gen(x, root, comm, transport, name):
    ctx, tr = _resolve(comm, transport)
    if not isinstance(root, int) or isinstance(root, bool) or not 0 <= root < tr.world_size:
        raise ValueError(f"root: must be a rank in [0, {tr.world_size}), got {root!r}")
    w = as_work(x, "x", writable=True)
    tag = ctx.tag(name)
    n = tr.world_size
    ranks = [(root + i) % n for i in range(n)]

    def gen():
        if n > 1 and w.arr.size > 0:
            yield from tree_bcast(tr, tag, w.arr, ranks)
    return gen(), w.obj, w.arr.nbytes


def bcast(x, root: int = 0, *, comm: MPI.Comm | None = None,
          transport: Transport | None = None, name: str | None = None):
    """Broadcast ``x`` from ``root`` in place, along a pipelined binary tree.

    Must be called by all ranks of ``comm`` with the same count, dtype and
    ``root``. Cost about ``log2(n) alpha + bytes/beta`` for long messages
    (segments of 256 KiB flow down the tree concurrently).

    Parameters
    ----------
    x : numpy.ndarray or torch.Tensor (contiguous)
        Data on ``root``; overwritten on the others.
    root : int
        Rank holding the data.

    Returns
    -------
    numpy.ndarray or torch.Tensor
        ``x``.

    Raises
    ------
    ValueError
        ``root`` out of range, ``x`` not contiguous or read-only.
    TypeError
        Unsupported buffer type or dtype.
    """
    gen, result, nbytes = _bcast_gen(x, root, comm, transport, name)
    run_inline(gen, nbytes=nbytes)
    return result


def ibcast(x, root: int = 0, *, comm: MPI.Comm | None = None,
           transport: Transport | None = None, name: str | None = None) -> Request:
    """Nonblocking :func:`bcast`; returns a :class:`Request`.

    Must be called by all ranks of ``comm``.
    """
    gen, result, nbytes = _bcast_gen(x, root, comm, transport, name)
    return submit(Request(gen, result, name, nbytes))

"""The training run's elastic worker set: resizes between steps that keep model, optimizer state and data position.

:class:`ElasticRun` binds a run's :class:`~hpcbench.train.steps.context.TrainContext`
to a :class:`hpcbench.runtime.workerset.WorkerSet` (the active prefix of the
ranks and its sleeping warm pool). The ``workers`` decision's applier
(:data:`hpcbench.train.adaptation.decisions.APPLIERS`) calls :meth:`ElasticRun.resize`
on every active rank, before the step the decision is due:

1. what the last step left in flight completes (``worker.flush``);
2. grow: every old rank packs its replica's state (``model.state_dict()``:
   parameters and buffers such as batch-norm statistics, and the
   optimizer's per-parameter state) into one byte buffer; rank 0 packs the
   run's context (step, data position, batch sizes, learning rate, the
   active synchroniser and its algorithm, every hook's state: the policies
   and their scheduled decisions, the fault counter);
3. the worker set changes (:meth:`WorkerSet.resize`: the pool is woken and
   the world split on a grow, the active communicator split on a shrink);
   each new worker receives the context and one old worker's state;
4. on the new communicator every active rank rebuilds its transport, its
   synchroniser (its buffers) and its replica around the same model; the
   batch sizes follow ``batch``: ``keep_global`` splits the same global
   batch over the new workers (the first ``global % n`` get one more),
   ``keep_local`` keeps each worker's batch (the global batch scales); the
   data stream continues at the same position, re-sliced over the new
   workers (:meth:`hpcbench.train.workloads.split.SplitTask.take`);
5. the phases' maxima over the new workers are agreed (one small allreduce)
   and rank 0 writes one row of the ``resizes`` table after the first step
   on the new set, with that step's time.

A rank that a shrink leaves out closes its replica and synchroniser and
sleeps in the pool; the run ends on it when the active ranks close the set.

What differs from KungFu, and why: KungFu's new workers are new processes
that rebuild the model and then receive the variables by a broadcast from
the old ones (``BroadcastGlobalVariablesOp`` after the resize); here they are
pool ranks that hold a replica already and receive state point to point
(:mod:`hpcbench.runtime.workerset`). A synchroniser's own state is rebuilt,
not moved (the compressed synchroniser's error-feedback residuals restart at
zero on every rank); model-averaging synchronisers (SMA, pair) hand a new
worker one old worker's model, and a shrink drops the leaving workers'
models, as KungFu's detached peers do.
"""

from __future__ import annotations

import time
from dataclasses import replace

import numpy as np

from hpcbench.runtime.wait import sleep_wait
from hpcbench.runtime.workerset import WorkerSet
from hpcbench.train.steps.hooks import Hook
from hpcbench.train.synchronisation.rebuild import rebuild, retire
from hpcbench.train.synchronisation.section import SyncSection

__all__ = ["ElasticRun", "split_batch", "pack_state", "unpack_state"]

#: ``resizes`` columns holding phases, in the order of the agreed vector
PHASES = ("decision_ms", "agreement_ms", "notify_ms", "process_start_ms", "communicator_ms", "state_ms",
          "rebuild_ms")


def split_batch(sizes, n: int, mode: str) -> tuple:
    """Every one of ``n`` workers' batch after a resize from batches ``sizes``.

    ``keep_global``: ``sum(sizes)`` split as evenly as possible (the first
    ``sum % n`` workers one sample more); ``keep_local``: every worker
    ``sizes[0]`` (the global batch scales with ``n``).

    Raises
    ------
    ValueError
        ``keep_global`` with fewer samples than workers.
    """
    if mode == "keep_local":
        return (int(sizes[0]),) * n
    total = int(sum(sizes))
    if total < n:
        raise ValueError(f"workers: a global batch of {total} cannot be split over {n} workers")
    base, extra = divmod(total, n)
    return tuple(base + (r < extra) for r in range(n))


def pack_state(model, optimizer) -> tuple[list, np.ndarray]:
    """A replica's state as ``(layout, bytes)``: every tensor of ``model.state_dict()`` and of the optimizer's
    per-parameter state, in order, concatenated as raw bytes (uint8); ``layout`` lists ``(where, key, dtype,
    shape)`` to unpack them."""
    import torch

    layout, parts = [], []
    tensors = [("model", k, v) for k, v in model.state_dict().items()]
    for pid, st in optimizer.state_dict()["state"].items():
        tensors += [("optimizer", (pid, k), v) for k, v in st.items() if isinstance(v, torch.Tensor)]
    for where, key, t in tensors:
        a = t.detach().contiguous().numpy()
        layout.append((where, key, a.dtype.str, a.shape))
        parts.append(a.reshape(-1).view(np.uint8))
    return layout, (np.concatenate(parts) if parts else np.zeros(0, dtype=np.uint8))


def unpack_state(layout, data: np.ndarray, model, optimizer) -> None:
    """Load a :func:`pack_state` buffer into ``model`` and ``optimizer`` (same architecture)."""
    import torch

    at, model_sd, opt_sd = 0, {}, optimizer.state_dict()
    for where, key, dtype, shape in layout:
        dt = np.dtype(dtype)
        n = int(np.prod(shape, dtype=np.int64)) * dt.itemsize
        t = torch.from_numpy(data[at:at + n].view(dt).reshape(shape).copy())
        at += n
        if where == "model":
            model_sd[key] = t
        else:
            opt_sd["state"].setdefault(key[0], {})[key[1]] = t
    model.load_state_dict(model_sd)
    optimizer.load_state_dict(opt_sd)


class ElasticRun(Hook):
    """One run's elastic worker set (see the module docstring); a hook of the run on every rank.

    Parameters
    ----------
    world : mpi4py.MPI.Comm
        Every rank of the job (the warm pool's bound).
    initial : int
        Active workers at the start.
    batch : {"keep_global", "keep_local"}
    table : hpcbench.results table or None
        Rank 0's ``resizes`` table.
    mode : str
        ``warm_pool`` (the only mode of the training runner).
    """

    def __init__(self, world, initial: int, batch: str, table=None, mode: str = "warm_pool") -> None:
        self.world, self.initial, self.batch, self.table, self.mode = world, initial, batch, table, mode
        self.set: WorkerSet | None = None
        self.hooks: list = []
        self._owned = None          # this run's (sync_comm, transport) on the current set
        self._row = None            # rank 0: the last resize's row, completed by the next step's time

    @property
    def active(self) -> bool:
        """Whether this rank works in the run now."""
        return self.set is not None and self.set.active

    # -- start, join, end ----------------------------------------------------------------------------
    def start(self, ctx, hooks) -> None:
        """Form the initial worker set (collective over the world); active ranks rebind ``ctx`` to it."""
        self.hooks = list(hooks)
        self.set = WorkerSet(self.world, self.initial)
        ctx.state.sizes = split_batch(ctx.state.sizes, self.initial, "keep_local")
        old_sync = ctx.sync
        if self.active:
            self._rebind(ctx, rebuild_worker=False)
        else:
            self._drop_comms(ctx)
        old_sync.close()        # the job built it on the world (collective there)

    def join(self, ctx):
        """Sleep in the pool until a grow activates this rank: then rebuild ``ctx`` from rank 0's context and
        an old worker's state, and return the step to run next; None when the run ended meanwhile."""
        act = self.set.wait()
        if act is None:
            return None
        head = act.header
        t0 = time.perf_counter()
        ctx.info, ctx.samples, ctx.epochs_started = head["info"], head["samples"], head["epochs_started"]
        ctx.state.sizes, ctx.state.lr = head["sizes"], head["lr"]
        ctx.schedule = head["schedule"]
        for h in self.hooks:
            name = type(h).__name__
            if name in head["hooks"]:
                h.import_state(head["hooks"][name])
        self._rebind(ctx, rebuild_worker=True, sync_entry=head["sync"], algorithm=head["algorithm"])
        if head["layout"] is not None:
            unpack_state(head["layout"], act.state, ctx.worker.model, ctx.worker.optimizer)
        act.phases.extra["rebuild_s"] = time.perf_counter() - t0
        self._agree_phases(ctx, act.phases, (0.0, 0.0))
        return head["next"]

    def close(self, ctx) -> None:
        """End the run's set: waiting ranks leave :meth:`join` with None (collective over the world)."""
        if self.set is None:
            return
        if self.active:
            self._drop_comms(ctx)
        self.set.close()
        self.set = None

    # -- resize (the workers decision's applier) ------------------------------------------------------
    def resize(self, ctx, n1: int) -> None:
        """Change the active set to ``n1`` workers before step ``ctx.upcoming`` (collective over the active ranks;
        a grow wakes the pool).

        Raises
        ------
        ValueError
            ``n1`` beyond the ranks started, or a global batch that cannot be split.
        """
        n0 = self.set.workers
        if n1 == n0:
            return
        if n1 > self.world.size:
            raise ValueError(f"workers: {n1} is more than the {self.world.size} ranks started (the warm pool)")
        sizes = split_batch(ctx.state.sizes, n1, self.batch)
        n = getattr(ctx.setup.data, "num_samples", None)
        if n is not None and sum(sizes) > n:
            raise ValueError(f"workers: {n1} workers' batches {sizes} make a step of more than the {n} samples")
        worker = ctx.worker
        worker.flush()
        header, state, layout = None, None, None
        if n1 > n0:
            if worker.model is not None:
                layout, state = pack_state(worker.model, worker.optimizer)
            if ctx.comm.rank == 0:
                sync = ctx.sync
                header = dict(info=ctx.info, next=ctx.upcoming, samples=ctx.samples, epochs_started=ctx.epochs_started,
                              sizes=sizes, lr=ctx.state.lr, schedule=ctx.schedule, layout=layout,
                              sync=sync.config.model_dump() if sync.config is not None else sync.name,
                              algorithm=getattr(sync, "algorithm", None) if sync.switches_algorithm else None,
                              hooks={type(h).__name__: s for h in self.hooks if (s := h.export_state()) is not None})
        phases = self.set.resize(n1, header, state)
        ctx.state.sizes = sizes
        if not self.active:
            worker.close()
            ctx.worker = None
            self._drop_comms(ctx)
            return
        t0 = time.perf_counter()
        self._rebind(ctx, rebuild_worker=True)
        phases.extra["rebuild_s"] = time.perf_counter() - t0
        self._agree_phases(ctx, phases, ctx.last_agreement)

    # -- helpers --------------------------------------------------------------------------------------
    def _rebind(self, ctx, rebuild_worker: bool, sync_entry=None, algorithm=None) -> None:
        """Rebind ``ctx`` to the set's communicator: a new transport and synchroniser (and replica around the
        same model); collective over the active ranks."""
        setup, comm = ctx.setup, self.set.comm
        model = retire(ctx, close_sync=self._owned is not None)
        if sync_entry is None:
            sync_entry = ctx.sync.config if ctx.sync.config is not None else ctx.sync.name
            algorithm = getattr(ctx.sync, "algorithm", None) if ctx.sync.switches_algorithm else None
        elif isinstance(sync_entry, dict):      # rank 0's section, sent as a mapping
            sync_entry = SyncSection.validate_python(sync_entry)
        self._free_owned()
        sync_comm = comm.Dup()
        transport = setup.transport_on(sync_comm)
        self._owned = (sync_comm, transport)
        ctx.setup = setup = replace(setup, comm=comm, sync_comm=sync_comm, transport=transport)
        ctx.state.rank = comm.rank
        rebuild(ctx, sync_entry, model, algorithm=algorithm, worker=rebuild_worker)

    def _drop_comms(self, ctx) -> None:
        """This rank leaves the set: its synchroniser closes and the run's communicators are freed."""
        if ctx.sync is not None and self._owned is not None:
            ctx.sync.close()
        ctx.sync = None
        self._free_owned()
        ctx.setup = replace(ctx.setup, comm=None, sync_comm=None, transport=None)

    def _free_owned(self) -> None:
        if self._owned is not None:
            sync_comm, transport = self._owned
            if hasattr(transport, "free"):
                transport.free()
            sync_comm.Free()
            self._owned = None

    def _agree_phases(self, ctx, phases, agreement) -> None:
        """Every phase's maximum over the new set; rank 0 keeps the row until the next step's time is known."""
        from mpi4py import MPI

        v = np.array([agreement[0], agreement[1], phases.notify_s, phases.process_start_s, phases.communicator_s,
                      phases.state_s, phases.extra.get("rebuild_s", 0.0)])
        out, moved = np.empty_like(v), np.zeros(1)
        sleep_wait(ctx.comm.Iallreduce(v, out, op=MPI.MAX))
        sleep_wait(ctx.comm.Ireduce(np.array([float(phases.bytes_moved)]), moved, op=MPI.SUM, root=0))
        if ctx.comm.rank == 0:
            row = dict(sync=ctx.label, step=-1, old=phases.old, new=phases.new, kind=phases.kind, mode=self.mode,
                       bytes_moved=int(moved[0]))
            row.update({k: 1e3 * float(x) for k, x in zip(PHASES, out)})
            row["resize_ms"] = sum(row[k] for k in PHASES[1:])
            self._row = row

    def after_step(self, ctx, telemetry) -> None:
        """Rank 0: the resize before this step gets its first step's time and its row."""
        if self._row is None or self.table is None:
            return
        row, self._row = self._row, None
        row.update(step=ctx.info.step, first_step_ms=1e3 * float(np.max(telemetry.column("step_s"))))
        self.table.append(row)
        if ctx.comm.rank == 0:
            line = ", ".join(f"{k[:-3]} {row[k]:.1f}" for k in PHASES)
            print(f"Resize {row['old']}->{row['new']} ({row['kind']}, {row['mode']}) before step {row['step']}: "
                  f"{row['resize_ms']:.1f} ms ({line} ms; first step {row['first_step_ms']:.1f} ms), "
                  f"{row['bytes_moved'] / 1e6:.2f} MB moved", flush=True)

"""The one sequence that replaces a run's synchroniser and replica between two steps.

Two things rebuild them while a run goes on: a policy's decision to switch synchroniser
(:mod:`hpcbench.train.adaptation.decisions`, on the same workers) and a resize of the elastic worker set
(:mod:`hpcbench.train.adaptation.elastic`, on new communicators). Both first :func:`retire` the old pair
(the replica's model is kept), then :func:`rebuild` builds the new synchroniser on the context's setup (its
synchronisation communicator and transport), orders its buckets by the context's schedule and builds the
replica around the kept model. Collective over the setup's communicators.
"""

from __future__ import annotations

from hpcbench.sync import build
from hpcbench.train.steps import replica

__all__ = ["retire", "rebuild"]


def retire(ctx, close_sync: bool = True):
    """Close the run's replica and (``close_sync``) its synchroniser; the replica's model, or None (emulated
    compute, or no replica).

    Parameters
    ----------
    ctx : hpcbench.train.steps.context.TrainContext
        The run; its ``worker`` and ``sync`` are closed, not cleared.
    close_sync : bool
        False when the synchroniser is not this caller's to close.
    """
    model = None
    if ctx.worker is not None:
        model = ctx.worker.model
        ctx.worker.close()
    if close_sync and ctx.sync is not None:
        ctx.sync.close()
    return model


def rebuild(ctx, entry, model=None, *, algorithm: str | None = None, worker: bool = True) -> None:
    """Set ``ctx.sync`` to a new synchroniser built from ``entry``, its bucket order, and (``worker``) a new replica.

    Parameters
    ----------
    ctx : hpcbench.train.steps.context.TrainContext
        The run: its ``setup`` gives the communicator, transport, bucket size, seed and device, its ``schedule``
        the bucket schedule; ``sync``, ``order`` and ``worker`` are replaced.
    entry : str or a synchroniser's config section
        What :func:`hpcbench.sync.build` takes.
    model : torch.nn.Module, optional
        The model the replica trains on (None: a new one from the seed, or the emulated timeline).
    algorithm : str, optional
        The allreduce algorithm the new synchroniser switches to (one that ``switches_algorithm``).
    worker : bool
        False leaves ``ctx.worker`` as it is (a rank that builds its replica later).
    """
    setup = ctx.setup
    ctx.sync = build(entry, setup.sync_comm, setup.transport, bucket_bytes=setup.settings.bucket_bytes,
                     seed=setup.settings.seed, device=setup.device)
    if algorithm is not None:
        ctx.sync.use_algorithm(algorithm)
    ctx.order = setup.bucket_order(ctx.sync, ctx.schedule)
    if worker:
        ctx.worker = replica.build_worker(ctx, model)

"""Applying an agreed decision to a run, between two steps, on every rank: one applier per decision field.

:data:`APPLIERS` maps each field of :class:`hpcbench.policies.decision.Decision`
this runner can apply to a function ``apply(ctx, value)`` that changes the
run's :class:`~hpcbench.train.steps.context.TrainContext` (the one place every
reader asks). A field without an applier makes the config refuse a policy that may
decide it; a new kind of decision is one applier and one registry line.

- ``batch_size``: every worker's batch from the next step; the data stream
  goes on from the samples already trained (no sample skipped or repeated
  within an epoch), the emulated compute follows the batch;
- ``learning_rate``: every optimizer of the replica;
- ``algorithm``: the active synchroniser's allreduce algorithm, for those
  that can switch it (``switches_algorithm``), after the buckets in flight
  complete;
- ``ratio``: the compressed synchroniser's kept fraction
  (where ``adjusts_ratio``), from the next buckets on (error feedback kept);
- ``sync``: a new synchroniser from a ``sync`` section, after the last
  step's communication completes; the replica keeps its model (rank 0's
  parameters are broadcast to every rank, as KungFu's ``AdaptiveSGDOptimizer``
  does when it switches from SMA to S-SGD) and its learning rate;
- ``workers``: the run's elastic worker set grows or shrinks
  (:meth:`hpcbench.train.adaptation.elastic.ElasticRun.resize`: model, optimizer state
  and data position kept, the synchroniser rebuilt on the new workers); a
  job without an ``elastic`` section refuses such a policy when the config
  is read.
"""

from __future__ import annotations

from dataclasses import dataclass

from hpcbench.policies.base import PolicyError
from hpcbench.runtime.registry import Registry
from hpcbench.sync import SYNCHRONISERS
from hpcbench.train.synchronisation.rebuild import rebuild, retire
from hpcbench.train.synchronisation.section import SyncSection

__all__ = ["APPLIERS", "AppliedDecision", "apply_decision"]


@dataclass(frozen=True)
class AppliedDecision:
    """A decision as applied, for the hooks (``on_decision``) and the ``decisions`` table.

    Attributes
    ----------
    step : int
        The step it took effect before.
    decided : int
        The step after which it was agreed (-1: before training).
    policy : str
    decision : hpcbench.policies.decision.Decision
    """

    step: int
    decided: int
    policy: str
    decision: object

    def row(self, label: str) -> dict:
        """The ``decisions`` table row of this decision in entry ``label``'s run."""
        d = self.decision
        b = d.batch_size
        return dict(sync=label, step=self.step, decided_step=self.decided, policy=self.policy,
                    batch_size="" if b is None else ",".join(map(str, b if isinstance(b, tuple) else (b,))),
                    learning_rate=float("nan") if d.learning_rate is None else float(d.learning_rate),
                    synchroniser=_text(d.sync), algorithm=_text(d.algorithm),
                    workers=-1 if d.workers is None else int(d.workers),
                    ratio=float("nan") if d.ratio is None else float(d.ratio),
                    reason=d.reason[:500])


def _text(section) -> str:
    if section is None:
        return ""
    if isinstance(section, str):
        return section
    dump = section.model_dump(exclude_defaults=True) if hasattr(section, "model_dump") else dict(section)
    return str({"name": section.name if hasattr(section, "name") else dump.get("name"), **dump})


def _batch_size(ctx, value) -> None:
    p = len(ctx.state.sizes)
    sizes = value if isinstance(value, tuple) else (value,) * p
    if len(sizes) != p:
        raise ValueError(f"batch_size: {value!r} gives {len(sizes)} workers' batches, the run has {p} workers")
    n = getattr(ctx.setup.data, "num_samples", None)
    if n is not None and sum(sizes) > n:
        raise ValueError(f"batch_size: {value!r} makes a step of {sum(sizes)} samples, more than the {n} "
                         f"training samples (a step would see a sample twice)")
    ctx.state.sizes = tuple(int(b) for b in sizes)


def _learning_rate(ctx, value) -> None:
    ctx.state.lr = float(value)
    ctx.worker.set_learning_rate(float(value))


def _algorithm(ctx, value) -> None:
    sync = ctx.sync
    if not sync.switches_algorithm:
        raise ValueError(f"algorithm: synchroniser {sync.name!r} cannot switch its allreduce algorithm")
    ctx.worker.flush()
    sync.use_algorithm(value)


def _ratio(ctx, value) -> None:
    sync = ctx.sync
    if not sync.adjusts_ratio(sync.config):
        raise ValueError(f"ratio: synchroniser {sync.name!r} has no compressor whose kept fraction can "
                         f"change (the compressed synchroniser with a compressor that takes a ratio)")
    ctx.worker.settle()     # buckets in flight were encoded at their start: the new ratio is the next start's
    sync.use_ratio(float(value))


def _sync(ctx, value) -> None:
    section = SyncSection.validate_python(value)
    old = ctx.sync
    new_cls = SYNCHRONISERS[section.name]
    for cls in (type(old), new_cls):
        if cls.averages == "wrapped":
            raise ValueError(f"sync: {cls.name!r} wraps the model (switches are between synchronisers that "
                             f"average gradients or models)")
    if ctx.setup.settings.compute == "emulated" and not new_cls.emulates:
        raise ValueError(f"sync: {section.name!r} needs compute: real")
    schedule = section.schedule or ctx.schedule
    if schedule == "priority" and new_cls.averages == "gradients" and not new_cls.schedulable:
        raise ValueError(f"sync: {section.name!r} has no ordered start for schedule: priority")
    ctx.worker.flush()
    if ctx.worker.model is not None:
        _broadcast_model(ctx.setup.comm, ctx.worker.model)
    model = retire(ctx)
    ctx.schedule = schedule
    rebuild(ctx, section, model)


def _workers(ctx, value) -> None:
    if ctx.elastic is None:
        raise ValueError(f"workers: {value!r} needs an elastic worker set (the config's elastic section)")
    ctx.elastic.resize(ctx, int(value))


def _broadcast_model(comm, model) -> None:
    """Rank 0's parameters on every rank (collective over ``comm``)."""
    import torch

    from hpcbench.runtime.wait import sleep_wait

    params = [p for p in model.parameters() if p.requires_grad]
    flat = torch.nn.utils.parameters_to_vector(params).detach().numpy().copy()
    sleep_wait(comm.Ibcast(flat, root=0))
    torch.nn.utils.vector_to_parameters(torch.from_numpy(flat), params)


#: decision field -> ``apply(ctx, value)``
APPLIERS: Registry = Registry("decision field", {
    "batch_size": _batch_size,
    "learning_rate": _learning_rate,
    "algorithm": _algorithm,
    "sync": _sync,
    "workers": _workers,
    "ratio": _ratio,
})


def apply_decision(ctx, policy: str, decision, decided: int, step: int) -> AppliedDecision:
    """Apply every field ``decision`` sets (before ``step``; collective where a field's applier is).

    Raises
    ------
    PolicyError
        A field this runner cannot apply, or a value its applier refuses; the message names the policy.
    """
    for field, value in decision.changes().items():
        if field not in APPLIERS:
            raise PolicyError(f"policy {policy!r}: this runner cannot apply {field} decisions (it applies "
                              f"{', '.join(APPLIERS)})")
        try:
            APPLIERS[field](ctx, value)
        except ValueError as exc:
            raise PolicyError(f"policy {policy!r}: decision before step {step}: {exc}") from None
    return AppliedDecision(step, decided, policy, decision)

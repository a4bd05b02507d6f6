"""The policies' hook: calls the policies (KungFu's order), and makes their decisions collective.

KungFu's ``PolicyHook`` (``srcs/python/kungfu/tensorflow/policy/
policy_hook.py``) calls its policies' before-hooks in list order and their
after-hooks in reverse order; this hook does the same, with the policies'
:class:`~hpcbench.policies.base.PolicyContext` and the step's telemetry, and
collects what they return. Once per step, after the ``after_epoch`` hooks,
:meth:`PolicyHook.agree` makes the step's proposals collective in one
exchange: every rank contributes, per policy, whether it proposes a decision,
the decision's 8-byte digest and its vote, and an allgather gives every rank
every rank's row. Then per policy:

- ``agreement: root``: rank 0's decision holds; when it has one, rank 0
  broadcasts it (pickled, only at such steps);
- ``agreement: consensus``: every rank must propose, and propose the same:
  KungFu's ``BytesConsensus`` (``srcs/go/kungfu/session``: all-reduce min
  and max of the bytes, equal iff all ranks hold the same bytes) applied to
  the flag and digest columns of the rows, which hold every rank's values;
  a disagreement stops the job on every rank with a :class:`PolicyError`
  naming the policy;
- votes: the column's sum, given to the policy's ``tally`` on every rank.

Agreed decisions are scheduled before their ``at_step`` (default: the next
step); :meth:`PolicyHook.due` hands the loop those due before a step, and the
loop applies them (:mod:`hpcbench.train.adaptation.decisions`). Decisions of
``before_train`` are agreed before step 0 and take effect from it. An
exception in a policy is re-raised as a :class:`PolicyError` naming the
policy and the hook; the job lifecycle then ends every rank.

Without policies there is no hook and no exchange: the step loop is then
what it was before policies existed.
"""

from __future__ import annotations

import time
from collections import defaultdict

import numpy as np

from hpcbench.policies.base import PolicyContext, PolicyError
from hpcbench.policies.decision import Decision, Vote
from hpcbench.runtime.wait import sleep_allgather, sleep_bcast
from hpcbench.train.steps.hooks import Hook

__all__ = ["PolicyHook", "policy_context"]

#: per policy and rank, in the exchange: proposes a decision, its digest (two 32-bit halves), votes, the vote
_SLOTS = 5


def policy_context(ctx, step: int) -> PolicyContext:
    """The policies' view of the run (:class:`~hpcbench.policies.base.PolicyContext`) at ``step``."""
    s, sync = ctx.setup.settings, ctx.sync
    return PolicyContext(rank=ctx.state.rank, world_size=len(ctx.state.sizes), step=step, epoch=ctx.epoch,
                         samples=ctx.samples, epoch_size=s.epoch_size, batch_sizes=tuple(ctx.state.sizes),
                         learning_rate=ctx.state.lr, sync=sync.name,
                         algorithm=getattr(sync, "algorithm", None) if sync.switches_algorithm else None,
                         total_steps=getattr(ctx.plan, "total_steps", None),
                         max_workers=_pool(ctx),
                         message_elements=tuple(int(n) for n in getattr(getattr(ctx.setup, "plan", None), "numel", ())),
                         **_algorithm_choice(sync, getattr(ctx.setup, "transport", None)))


def _algorithm_choice(sync, transport) -> dict:
    """The algorithms ``sync`` can switch to (registered, with a cost model) and the per-link cost model, for a
    synchroniser that switches its algorithm; with links modelled between hosts only (``link.scope:
    between_hosts``) on several hosts, also the host layout and the two-level model; nothing otherwise."""
    if not sync.switches_algorithm:
        return {}
    from hpcbench.collectives.algorithms import find, names
    from hpcbench.collectives.linkcost import allreduce_options, predict_allreduce_links

    hosts = tuple(getattr(transport, "ranks_per_host", ()) or ())
    two_level = dict(ranks_per_host=hosts, allreduce_time_hosts=between_hosts_time) if len(hosts) > 1 else {}
    return dict(algorithms=tuple(a for a in names() if find(a).cost is not None),
                allreduce_time=predict_allreduce_links, algorithm_options=allreduce_options, **two_level)


def between_hosts_time(algorithm: str, nbytes: int, ranks_per_host, alpha_s: float, beta: float) -> float:
    """Seconds of one allreduce of ``nbytes`` per rank over hosts of ``ranks_per_host`` ranks when messages inside
    a host are free (shared memory, not modelled) and those between hosts take ``alpha_s + nbytes beta``: the
    two-level model (:func:`hpcbench.collectives.linkcost.predict_allreduce_hosts`) of ``link.scope:
    between_hosts``; :attr:`~hpcbench.policies.base.PolicyContext.allreduce_time_hosts`."""
    from hpcbench.sync.base import allreduce_time

    hosts = tuple(int(k) for k in ranks_per_host)
    return allreduce_time(algorithm, int(nbytes), sum(hosts), alpha_s, beta, hosts)


def _pool(ctx) -> int | None:
    """The most workers an elastic run can have (the ranks started), None without an elastic worker set."""
    elastic = getattr(ctx, "elastic", None)
    return elastic.world.size if elastic is not None else None


def _portable(d: Decision) -> Decision:
    """``d`` with a synchroniser section as a plain mapping (sections are classes made at run time)."""
    if d.sync is not None and hasattr(d.sync, "model_dump"):
        from dataclasses import replace

        return replace(d, sync=d.sync.model_dump())
    return d


class PolicyHook(Hook):
    """Every policy of a run, behind one hook of the step loop (see the module docstring).

    Parameters
    ----------
    policies : sequence of (str, hpcbench.policies.Policy)
        Each policy with its name in messages and the ``decisions`` table, in config order.
    comm : mpi4py.MPI.Comm
        The job's communicator (the exchange runs on the run's active one, ``ctx.comm``, collective on every
        active rank).
    """

    def __init__(self, policies, comm) -> None:
        self.policies = list(policies)
        self.comm = comm
        self.needs_all_ranks = any(p.needs_all_ranks for _, p in self.policies)
        self._decisions: dict[int, Decision] = {}      # this step's proposals, by policy index
        self._votes: dict[int, float] = {}
        self._scheduled: dict[int, list] = defaultdict(list)     # step -> [(policy name, decision, decided at)]
        self._step = -1
        self._decide_s = 0.0       # time in this step's policy calls (the resize table's decision phase)

    # -- the hooks: call the policies, collect their proposals ---------------------------------------
    def before_train(self, ctx) -> None:
        self._call(ctx, "before_train", -1, reverse=False)
        self.agree(ctx)

    def before_epoch(self, ctx) -> None:
        self._call(ctx, "before_epoch", ctx.step, reverse=False)

    def before_step(self, ctx) -> None:
        self._call(ctx, "before_step", ctx.step, reverse=False)

    def after_step(self, ctx, telemetry) -> None:
        self._call(ctx, "after_step", ctx.step, reverse=True, telemetry=telemetry)

    def after_epoch(self, ctx) -> None:
        self._call(ctx, "after_epoch", ctx.step, reverse=True)

    def after_train(self, ctx) -> None:
        self._call(ctx, "after_train", ctx.step, reverse=True)
        late = sorted({*self._decisions, *self._votes})
        if late:
            raise PolicyError(f"policy {self.policies[late[0]][0]!r}: a decision or vote in after_train has no "
                              f"step left to apply to")

    def _call(self, ctx, hook: str, step: int, reverse: bool, telemetry=None) -> None:
        t0 = time.perf_counter()
        self._call_policies(ctx, hook, step, reverse, telemetry)
        self._decide_s += time.perf_counter() - t0

    def _call_policies(self, ctx, hook: str, step: int, reverse: bool, telemetry) -> None:
        self._step = step
        pctx = policy_context(ctx, step)
        order = range(len(self.policies) - 1, -1, -1) if reverse else range(len(self.policies))
        for i in order:
            name, policy = self.policies[i]
            try:
                out = getattr(policy, hook)(pctx, telemetry) if telemetry is not None else getattr(policy, hook)(pctx)
            except Exception as exc:  # noqa: BLE001 - re-raised naming the policy
                raise PolicyError(f"policy {name!r} raised in {hook} at step {step} on rank {ctx.state.rank}: "
                                  f"{type(exc).__name__}: {exc}") from exc
            self._take(i, out, hook)

    def _take(self, i: int, out, hook: str) -> None:
        if out is None:
            return
        name = self.policies[i][0]
        if isinstance(out, Vote):
            self._votes[i] = self._votes.get(i, 0.0) + float(out.value)
        elif isinstance(out, Decision):
            self._declared(i, out, hook)
            if i in self._decisions:
                raise PolicyError(f"policy {name!r}: two decisions in one step (the second from {hook})")
            self._decisions[i] = out
        else:
            raise PolicyError(f"policy {name!r}: {hook} returned {type(out).__name__}, not a Decision, a Vote "
                              f"or None")

    def _declared(self, i: int, d: Decision, hook: str) -> None:
        name, policy = self.policies[i]
        undeclared = sorted(set(d.changes()) - set(policy.decides))
        if undeclared:
            raise PolicyError(f"policy {name!r}: {hook} decided {', '.join(undeclared)}, which its class does not "
                              f"declare in decides ({', '.join(sorted(policy.decides))})")

    # -- agreement -------------------------------------------------------------------------------------
    def agree(self, ctx) -> None:
        """Exchange this step's proposals (collective over every rank), check or broadcast them, tally the
        votes, and schedule the decisions. Leaves the time of this step's policy calls and of the agreement in
        ``ctx.last_agreement`` (seconds)."""
        t_agree = time.perf_counter()
        self._agree(ctx)
        ctx.last_agreement = (self._decide_s, time.perf_counter() - t_agree)
        self._decide_s = 0.0

    def _agree(self, ctx) -> None:
        n, t = len(self.policies), self._step
        # an elastic run's active workers (a resize changes them), else the job's ranks
        comm = self.comm if getattr(ctx, "elastic", None) is None else ctx.comm
        row = np.zeros(_SLOTS * n)
        for i, d in self._decisions.items():
            hi, lo = np.frombuffer(d.digest(), dtype=">u4")
            row[_SLOTS * i:_SLOTS * i + 3] = (1.0, float(hi), float(lo))
        for i, v in self._votes.items():
            row[_SLOTS * i + 3:_SLOTS * i + 5] = (1.0, v)
        rows = sleep_allgather(comm, row).reshape(comm.size, n, _SLOTS)
        mine, self._decisions, self._votes = self._decisions, {}, {}
        agreed: dict[int, Decision] = {}
        rooted = [i for i in range(n) if self.policies[i][1].agreement == "root" and rows[0, i, 0]]
        if rooted:      # rank 0's decisions, to every rank (only at the steps that have some)
            agreed.update(sleep_bcast(comm, {i: mine[i] for i in rooted} if comm.rank == 0 else None))
        for i, (name, policy) in enumerate(self.policies):
            if policy.agreement == "consensus" and np.any(rows[:, i, 0]):
                cols = rows[:, i, :3]
                if not np.all(cols.min(axis=0) == cols.max(axis=0)):    # KungFu's BytesConsensus
                    who = [r for r in range(comm.size) if rows[r, i, 0]]
                    raise PolicyError(f"policy {name!r}: ranks disagree on the decision after step {t} (ranks "
                                      f"{who} proposed one, digests differ or some ranks proposed none); a "
                                      f"consensus policy must decide alike on every rank")
                agreed[i] = mine[i]
            if np.any(rows[:, i, 3]):
                total = float(rows[:, i, 4].sum())
                try:
                    out = policy.tally(policy_context(ctx, t), total)
                except Exception as exc:  # noqa: BLE001 - re-raised naming the policy
                    raise PolicyError(f"policy {name!r} raised in tally at step {t}: {type(exc).__name__}: "
                                      f"{exc}") from exc
                if out is not None:
                    if not isinstance(out, Decision) or i in agreed:
                        raise PolicyError(f"policy {name!r}: tally returned {out!r} (one Decision or None, and "
                                          f"no decision of its own in the same step)")
                    self._declared(i, out, "tally")
                    agreed[i] = out
        for i in sorted(agreed):
            self._schedule(self.policies[i][0], agreed[i], t)

    def _schedule(self, name: str, d: Decision, t: int) -> None:
        at = t + 1 if d.at_step is None else d.at_step
        if at <= t:
            raise PolicyError(f"policy {name!r}: at_step {d.at_step} is not after step {t}, when it decided")
        for other, od, _ in self._scheduled[at]:
            clash = set(d.changes()) & set(od.changes())
            if clash:
                raise PolicyError(f"policies {other!r} and {name!r} both set {', '.join(sorted(clash))} before "
                                  f"step {at}")
        self._scheduled[at].append((name, d, t))

    def export_state(self):
        """The policies' state and the decisions scheduled ahead, picklable (a worker joining the run continues
        from them): each policy's attributes but its config section (the joining worker built the same one
        from the same config), sections in decisions as plain mappings."""
        states = [{k: v for k, v in vars(p).items() if k != "config"} for _, p in self.policies]
        ahead = {t: [(name, _portable(d), at) for name, d, at in due] for t, due in self._scheduled.items()}
        return states, ahead

    def import_state(self, state) -> None:
        """Continue from rank 0's :meth:`export_state`."""
        states, ahead = state
        for (_, policy), st in zip(self.policies, states):
            policy.__dict__.update(st)
        self._scheduled = defaultdict(list, ahead)

    def due(self, step: int) -> list:
        """``(policy name, decision, step decided)`` of every decision to apply before ``step``, in config order."""
        return self._scheduled.pop(step, [])

"""``interference``: switch the allreduce algorithm when most workers see their allreduce throughput fall.

KungFu's interference strategy (``srcs/go/kungfu/session/adaptiveStrategies.go``,
``Session.ChangeStrategy``; driven per step by ``experimental/adapt_strategy/
adapt_strategy.py`` through ``change_strategy()``, figure 5 of the OSDI'20
paper): every worker times its allreduces, keeps a reference window of
durations, and flags congestion when the current average duration exceeds
``interferenceThreshold = 1.25`` times the reference's (throughput below
``1 / 1.25 = 0.8`` of it); the flags are all-reduced with SUM, and when the
sum exceeds ``size / 2`` every worker replaces its strategy with a star
whose master is rank 1 (``plan.GenAlternativeStar(peers, 1)``), once (the
benchmark stops asking after the first change).

hpcbench, per step, on every rank:

- the step's allreduce throughput is ``bytes / comm_span_s``: the step's
  gradient bytes (``PolicyContext.message_elements`` x itemsize) over the
  span from the first bucket's start to the last one's completion;
- the steps ``start .. start + window - 1`` set the reference (the mean of
  their throughputs; step 0 is skipped by default: it carries the start-up
  skew); from then on the rank votes 1 when the step's throughput is below
  ``threshold`` (0.8) times the reference, else 0
  (:class:`~hpcbench.policies.decision.Vote`, summed over ranks by the
  runner: KungFu's allreduce-sum of flags, through the policies' exchange);
- when the sum exceeds ``world_size / 2`` the policy switches the active
  synchroniser's allreduce algorithm, once (``agreement`` by the vote: every
  rank computes the same decision from the same all-gathered telemetry).

Where hpcbench differs, and why: KungFu switches to one fixed alternative
(the star rooted at rank 1), which helps when the interference is on the
default star's master, rank 0. hpcbench switches to the registered
algorithm that the alpha-beta model predicts fastest for the step's
messages given the *measured* per-link times: each rank's link seconds per
byte in the step that tipped the vote (``link_busy_s / sent_bytes``, from
the modelled links' wire times), priced by the runner's per-link cost model
(:func:`hpcbench.collectives.linkcost.predict_allreduce_links`, through
``PolicyContext.allreduce_time``), with the options the model priced it
with (``PolicyContext.algorithm_options``). Where the root is the
parameter KungFu turns, hpcbench turns the shard sizes of
``weighted_shards`` (:mod:`hpcbench.collectives.algorithms.weighted_shards`):
the slow rank owns no shard, so its link sends its gradient once (``m``
bytes, the least any allreduce can) and the healthy ranks reduce and
broadcast; a star rooted at a healthy rank would still send ``m`` from the
slow rank and ``p - 1`` copies from the root, one after the other unless
pipelined (the model: ``7 m beta`` against ``4 m beta`` for 4 ranks and a
4x slower link). The decision names the algorithm with those options
(``{"name": "weighted_shards", "weights": (...)}``) or, for an algorithm
without options, its name. When the model predicts the active algorithm
to be the fastest already, nothing changes and the votes are tallied again
at the next step. A rank that sent nothing in the step has no measured
time; its link is taken as fast as the fastest measured (it did not slow
the step). KungFu compares a moving average of durations; hpcbench
compares each step's throughput (the issue's rule), so one slow step is
enough to vote.

Several hosts (the runner's ``link.scope: between_hosts``: messages inside
a host through shared memory, those between hosts over the modelled link;
``PolicyContext.ranks_per_host`` holds the layout): the algorithms are
priced by the two-level model instead
(:func:`hpcbench.collectives.linkcost.predict_allreduce_hosts`, through
``PolicyContext.allreduce_time_hosts``): free inside a host, the slowest
measured link between hosts (each rank's seconds per byte counts only the
bytes it sent to other hosts). There the host-aware algorithms
(``hierarchical``: ``2 (G-1)/G m/L`` bytes per rank across ``G`` hosts of
``L`` ranks, against the ring's ``2 (p-1)/p m``) are the ones the model
finds cheap. One host, or every link modelled (``scope: all``): the
per-link model as above, unchanged.
"""

from __future__ import annotations

import math
from typing import Optional

import numpy as np
from pydantic import Field, NonNegativeInt, PositiveInt

from hpcbench.policies.base import Policy, PolicyConfig, PolicyContext
from hpcbench.policies.decision import Decision, Vote

__all__ = ["Interference"]


class Interference(Policy):
    """KungFu's interference strategy: vote when the allreduce throughput falls below 0.8 of the reference; switch
    to the algorithm predicted fastest on the measured links when more than half the workers vote (module
    docstring)."""

    class Config(PolicyConfig):
        """The reference window, the threshold, and the prediction's inputs."""

        threshold: float = Field(0.8, gt=0.0, lt=1.0, description="vote when the step's allreduce throughput is "
                                                                  "below this fraction of the reference (KungFu: "
                                                                  "1 / 1.25)")
        start: NonNegativeInt = Field(1, description="first step measured (step 0 carries the start-up skew)")
        window: PositiveInt = Field(1, description="steps whose mean throughput is the reference (the issue: the "
                                                   "first)")
        candidates: Optional[list[str]] = Field(None, description="algorithms to choose from (default: every "
                                                                  "registered one with a cost model)")
        latency_s: float = Field(0.0, ge=0.0, le=3600.0, description="per-message latency the prediction assumes "
                                                                     "(the links' latency_s)")

        def needs_link_times(self) -> bool:
            return True

        def monitor_columns(self) -> tuple[str, ...]:
            return ("comm_span_s", "sent_bytes", "link_busy_s")

    name = "interference"
    decides = frozenset({"algorithm"})
    needs_all_ranks = True

    def __init__(self, config=None) -> None:
        super().__init__(config)
        self.seen: list[float] = []           # throughputs of the reference window, bytes/s
        self.reference = math.nan             # bytes/s
        self.betas: np.ndarray | None = None  # the last step's per-rank link s/byte
        self.switched = False
        self.last_throughput = math.nan

    @staticmethod
    def step_bytes(ctx: PolicyContext, telemetry) -> float:
        """Bytes the step's allreduces reduced (the buckets' elements x itemsize; this rank's sent bytes where the
        runner gives no buckets)."""
        if ctx.message_elements:
            return float(sum(ctx.message_elements) * ctx.message_itemsize)
        return telemetry["sent_bytes"]

    @staticmethod
    def link_betas(telemetry) -> np.ndarray | None:
        """Each rank's measured link seconds per byte in the step (ranks that sent nothing: the fastest measured);
        None when no rank measured one (nothing sent: one worker)."""
        sent, busy = telemetry.column("sent_bytes"), telemetry.column("link_busy_s")
        ok = (sent > 0) & np.isfinite(busy)
        if not ok.any():
            return None
        betas = np.where(ok, busy / np.where(ok, sent, 1.0), np.nan)
        return np.where(ok, betas, np.nanmin(betas))

    def after_step(self, ctx: PolicyContext, telemetry) -> Vote | None:
        c = self.config
        if self.switched or ctx.step < c.start:
            return None
        self.betas = self.link_betas(telemetry)     # every rank, every step: tally needs the same on all
        span = telemetry["comm_span_s"]
        if self.betas is None or not (span > 0 and math.isfinite(span)):
            return None         # no allreduce or no link time measured in this step (one worker)
        tput = self.step_bytes(ctx, telemetry) / span
        self.last_throughput = tput
        if len(self.seen) < c.window:
            self.seen.append(tput)
            if len(self.seen) == c.window:
                self.reference = float(np.mean(self.seen))
            return None
        return Vote(1.0 if tput < c.threshold * self.reference else 0.0)

    def tally(self, ctx: PolicyContext, total: float) -> Decision | None:
        if self.switched or total <= ctx.world_size / 2 or self.betas is None:
            return None
        if ctx.allreduce_time is None or not ctx.algorithms:
            raise ValueError(f"synchroniser {ctx.sync!r} cannot switch its allreduce algorithm (use one of "
                             f"hpcbench's allreduces)")
        candidates = self.config.candidates or list(ctx.algorithms)
        unknown = [a for a in candidates if a not in ctx.algorithms]
        if unknown:
            raise ValueError(f"candidates: {unknown[0]!r} is not an algorithm it can switch to ("
                             f"{', '.join(ctx.algorithms)})")
        times = self.predicted(ctx, candidates)
        best = min(candidates, key=lambda a: times[a])
        if best == ctx.algorithm:
            return None
        self.switched = True
        options = ctx.algorithm_options(best, self.betas) if ctx.algorithm_options is not None else {}
        choice = {"name": best, **options} if options else best
        predicted = ", ".join(f"{a} {1e3 * t:.1f} ms" for a, t in sorted(times.items(), key=lambda kv: kv[1]))
        slow = int(np.argmax(self.betas))
        model = (f"two-level model, hosts {'+'.join(map(str, ctx.ranks_per_host))}, links between hosts at "
                 f"{8e-6 / self.betas[slow]:.3g} Mbit/s; " if self.two_level(ctx) else "")
        return Decision(algorithm=choice, reason=f"interference: {total:g} of {ctx.world_size} workers saw the "
                                               f"allreduce throughput below {self.config.threshold:g} of the "
                                               f"reference; slowest link rank {slow} "
                                               f"({self.betas[slow] / self.betas.min():.2g}x the fastest); "
                                               f"{model}predicted per step: {predicted}")

    @staticmethod
    def two_level(ctx: PolicyContext) -> bool:
        """Whether the run's links are modelled between hosts only, on several hosts (then the two-level model
        prices the algorithms)."""
        return len(ctx.ranks_per_host) > 1 and ctx.allreduce_time_hosts is not None

    def predicted(self, ctx: PolicyContext, candidates) -> dict:
        """Each candidate's predicted seconds per step (the step's messages, one allreduce each) on the links
        measured last step.

        One host, or every link modelled: the per-link model (``ctx.allreduce_time`` with each rank's
        measured seconds per byte). Several hosts with links modelled between them only: the two-level model
        (``ctx.allreduce_time_hosts``) on the host layout, free inside a host and the slowest measured link
        between hosts (a step of every algorithm waits for its slowest message across)."""
        nbytes = [n * ctx.message_itemsize for n in (ctx.message_elements or (1,))]
        alpha = self.config.latency_s
        if self.two_level(ctx):
            inter = float(np.max(self.betas))
            return {a: sum(ctx.allreduce_time_hosts(a, m, ctx.ranks_per_host, alpha, inter) for m in nbytes)
                    for a in candidates}
        return {a: sum(ctx.allreduce_time(a, m, alpha, self.betas) for m in nbytes) for a in candidates}

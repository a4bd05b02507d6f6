"""The policy contract: KungFu's six hooks, called on every rank, returning decisions the loop applies.

KungFu (Mai et al., OSDI'20; ``srcs/python/kungfu/tensorflow/policy/
base_policy.py`` and ``policy_hook.py``) adapts a training job through
policies: small objects with ``before_train``, ``before_epoch``,
``before_step``, ``after_step``, ``after_epoch`` and ``after_train`` hooks,
composed in a list whose before-hooks run in list order and after-hooks in
reverse order. hpcbench keeps the hooks and their order and differs in two
ways, deliberately:

- a KungFu policy changes the job itself (it calls a batch-size setter, or a
  collective inside its hook); an hpcbench policy only *returns* a
  :class:`~hpcbench.policies.decision.Decision` (or a
  :class:`~hpcbench.policies.decision.Vote`), and the runner makes it
  collective and applies it, so a policy never touches MPI, data or
  communicators and can be tested on recorded telemetry alone;
- hooks receive a :class:`PolicyContext` (the step, epoch, batch sizes,
  learning rate, synchroniser) and ``after_step`` the step's
  :class:`~hpcbench.policies.telemetry.Telemetry` (the monitors' outputs
  included), instead of a TensorFlow session.

How a decision becomes collective is the class's :attr:`Policy.agreement`:

``"root"``
    Rank 0's decision holds: the runner broadcasts it (a policy that
    decides from rank 0's view, e.g. a centralised controller reading every
    rank's telemetry there).
``"consensus"``
    Every rank must return the same decision at the same step (a policy that
    decides from what all ranks see alike: the step count, the monitors'
    all-reduced values); the runner checks it as KungFu's ``BytesConsensus``
    (all-reduce min and max of the decision's bytes) and stops the job if
    the ranks disagree.

A :class:`~hpcbench.policies.decision.Vote` from any hook is summed over
ranks by the runner, which then calls :meth:`Policy.tally` with the total on
every rank (KungFu's interference strategy).

A decision takes effect before the next step, or before its ``at_step``. The
runner calls a policy's hooks on every rank; an exception in one ends the job
on every rank with a message naming the policy.

Policies live in ``hpcbench/policies/NAME.py``, one per file, each with its
own ``Config`` section, and are registered by one line in
:data:`hpcbench.policies.POLICIES`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from hpcbench.runtime.config import StrategyConfig

__all__ = ["Policy", "PolicyConfig", "PolicyContext", "PolicyError"]


class PolicyError(RuntimeError):
    """A policy failed, or its decisions cannot be applied or agreed; the message names the policy."""


@dataclass(frozen=True)
class PolicyContext:
    """What a policy knows of the run when a hook is called (the same on every rank but ``rank``).

    Attributes
    ----------
    rank, world_size : int
    step : int
        The step about to run (before-hooks) or just run (after-hooks), from
        0; -1 in ``before_train``.
    epoch : int
        The epoch of the next sample to train (after ``after_epoch``: the
        epoch that starts); 0 when the data has no epochs.
    samples : int
        Samples trained so far, all workers together.
    epoch_size : int or None
        Samples per epoch (None: no epochs).
    batch_sizes : tuple of int
        Every worker's batch size now.
    learning_rate : float
    sync : str
        The active synchroniser's registered name.
    algorithm : str or None
        Its allreduce algorithm, where it has one that can be switched.
    total_steps : int or None
        Steps the run's plan will take, where it knows.
    max_workers : int or None
        The most workers the run can have (an elastic run's ranks started; None: the worker count is fixed).
    message_elements : tuple of int
        Elements of each gradient message a step sends (the runner's buckets,
        in order); empty where the runner does not say.
    message_itemsize : int
        Bytes per element of those messages (float32 gradients: 4).
    algorithms : tuple of str
        The allreduce algorithms the active synchroniser could switch to and
        that have a cost model (empty where it cannot switch).
    allreduce_time : callable or None
        The runner's cost model over links of different speeds,
        ``allreduce_time(algorithm, nbytes, alpha_s, betas) -> seconds``
        (:func:`hpcbench.collectives.linkcost.predict_allreduce_links`, a pure
        function: a policy prices algorithms without importing the
        collectives); None where the runner has none.
    algorithm_options : callable or None
        ``algorithm_options(algorithm, betas) -> dict``: the options with
        which ``allreduce_time`` priced ``algorithm`` on those links (the
        shard weights of ``weighted_shards``,
        :func:`hpcbench.collectives.linkcost.allreduce_options`); None where
        the runner has none.
    ranks_per_host : tuple of int
        With links modelled between hosts only (the training runner's
        ``link.scope: between_hosts``): the ranks of each host of the active
        communicator, hosts in the order of their lowest rank (as the
        ``hierarchical`` allreduce groups them); ``()`` otherwise (every
        link modelled alike, or the layout not known).
    allreduce_time_hosts : callable or None
        The two-level cost model for that layout,
        ``allreduce_time_hosts(algorithm, nbytes, ranks_per_host, alpha_s,
        beta) -> seconds``: messages inside a host free (shared memory, not
        modelled), those between hosts at latency ``alpha_s`` and ``beta``
        s/byte (:func:`hpcbench.collectives.linkcost.predict_allreduce_hosts`);
        None where the runner has none.
    """

    rank: int
    world_size: int
    step: int
    epoch: int
    samples: int
    epoch_size: int | None
    batch_sizes: tuple
    learning_rate: float
    sync: str
    algorithm: str | None
    total_steps: int | None
    max_workers: int | None = None
    message_elements: tuple = ()
    message_itemsize: int = 4
    algorithms: tuple = ()
    allreduce_time: object = None
    algorithm_options: object = None
    ranks_per_host: tuple = ()
    allreduce_time_hosts: object = None


class PolicyConfig(StrategyConfig):
    """Base of a policy's config section (a policy without options uses it as is)."""

    def needs_epochs(self) -> bool:
        """Whether the policy acts on epoch boundaries (a runner whose data has no epochs refuses it)."""
        return False

    def monitor_columns(self) -> tuple[str, ...]:
        """The monitor outputs (``Telemetry.monitors`` keys, ``LABEL_OUTPUT``) the policy reads (a runner whose
        monitors do not produce one refuses it); a name of the runner's per-rank telemetry fields is one too."""
        return ()

    def needs_link_times(self) -> bool:
        """Whether the policy reads each rank's measured link time per byte (``sent_bytes``, ``link_busy_s``),
        which only modelled links measure (a runner without them refuses it)."""
        return False

    def sync_sections(self) -> tuple:
        """The synchronisers (names or ``sync`` sections) the policy may switch to, checked by the runner when
        the config is read."""
        return ()


class Policy:
    """An adaptation policy: hooks that return a decision, a vote or None (the default for each).

    Subclasses set ``name`` (the registry name), ``decides`` (the decision
    fields they may set: a runner without an applier for one refuses the
    policy when the config is read) and, where they have options, a
    ``Config`` section; :meth:`__init__` receives that section.

    Parameters
    ----------
    config : PolicyConfig
        The policy's own section of the job config.
    """

    #: its config section
    Config: ClassVar[type[PolicyConfig]] = PolicyConfig
    #: registry name
    name: ClassVar[str] = ""
    #: the :data:`~hpcbench.policies.decision.FIELDS` its decisions may set
    decides: ClassVar[frozenset] = frozenset()
    #: ``"root"`` or ``"consensus"`` (module docstring)
    agreement: ClassVar[str] = "consensus"
    #: whether ``after_step`` needs every rank's telemetry on every rank (``Telemetry.ranks``), which costs
    #: an allgather per step instead of a gather to rank 0
    needs_all_ranks: ClassVar[bool] = False
    #: whether it reads StellaTrain's per-rank telemetry records (``Telemetry.records()``): the runner then
    #: meters and measures them
    needs_telemetry: ClassVar[bool] = False
    #: the table its decisions' ``detail`` records go to (None: no detail); their type: :meth:`detail_type`
    detail_table: ClassVar[str | None] = None

    @classmethod
    def detail_type(cls) -> type | None:
        """The dataclass of its decisions' ``detail`` records (fields with units: the runner builds the
        :attr:`detail_table`'s columns from it); None without detail."""
        return None

    def __init__(self, config: PolicyConfig | None = None) -> None:
        self.config = config if config is not None else self.Config()

    def before_train(self, ctx: PolicyContext):
        """Before the first step; a decision here takes effect from step 0."""

    def before_epoch(self, ctx: PolicyContext):
        """Before the first step of each epoch (epoch 0 included)."""

    def before_step(self, ctx: PolicyContext):
        """Before each step."""

    def after_step(self, ctx: PolicyContext, telemetry):
        """After each step, with its :class:`~hpcbench.policies.telemetry.Telemetry`."""

    def after_epoch(self, ctx: PolicyContext):
        """After the step that completed an epoch (``ctx.epoch`` is the epoch that starts next)."""

    def after_train(self, ctx: PolicyContext):
        """After the last step (a decision here has no step left to apply to: it is an error)."""

    def tally(self, ctx: PolicyContext, total: float):
        """The decision (or None) from the sum over ranks of this step's votes; called on every rank with the
        same total."""

"""Typed extension points of the federated emulation: strategies, models, datasets.

A new method is one file and one registry line (see ``docs/architecture.md``):

- an :class:`Aggregator` (server optimizer) in ``fl/aggregation/NAME.py``,
  registered in ``AGGREGATORS``;
- a :class:`Selector` (participant selection) in ``fl/selection/NAME.py``,
  registered in ``SELECTORS``;
- a :class:`FederatedDataset` in ``fl/data/NAME.py`` (``DATASETS``) and an
  :class:`FLModel` in ``fl/models/NAME.py`` (``MODELS``), which match through
  their ``input_kind``.

Each strategy declares its own typed config section, a :class:`StrategyConfig`
subclass named ``Config`` in the class;
:func:`hpcbench.runtime.config.strategy_section` turns a registry into the config field ``{name: REGISTERED_NAME, ...that class's
keys}``, so the registry is the only list of names, and a strategy is built
from its section alone (plus the job's seed and the few facts it declares in
its constructor), never from the whole job config.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any, ClassVar, Mapping

import numpy as np

from hpcbench.fl.data.base import FederatedDataset
from hpcbench.runtime.config import StrategyConfig

__all__ = ["STATUS_COMPLETED", "STATUS_STRAGGLER", "STATUS_DROPPED", "CLIENT_STATUSES", "StrategyConfig",
           "ClientUpdates", "RoundFeedback", "Aggregator", "Selector", "FLModel", "FederatedDataset"]

#: the client's update was aggregated
STATUS_COMPLETED = "completed"
#: the client finished after the round's ``participants``-th (overcommitment): not aggregated
STATUS_STRAGGLER = "straggler"
#: the client went offline before finishing (availability trace): not aggregated
STATUS_DROPPED = "dropped"
CLIENT_STATUSES = (STATUS_COMPLETED, STATUS_STRAGGLER, STATUS_DROPPED)


@dataclass(frozen=True)
class ClientUpdates:
    """What the round's aggregated clients report besides their model updates.

    Rows follow the order of the ``deltas`` they come with (ascending client id).

    Attributes
    ----------
    client_ids : ndarray of shape (m,), int64
    num_examples : ndarray of shape (m,), float64
        Local example counts ``n_k``.
    train_loss : ndarray of shape (m,), float64
        Mean local training loss (nat).
    global_loss : ndarray of shape (m,), float64
        Mean loss of the *global* model on the client's local training data,
        before training (``F_k(w)`` of q-FedAvg; NaN unless the aggregator asked
        for it with :attr:`Aggregator.needs_global_loss`).
    learning_rate : float
        Client learning rate of the round (after decay).
    """

    client_ids: np.ndarray
    num_examples: np.ndarray
    train_loss: np.ndarray
    global_loss: np.ndarray
    learning_rate: float


@dataclass(frozen=True)
class RoundFeedback:
    """Per-client outcome of one round (or, in async mode, of one server update), given to
    :meth:`Selector.feedback`.

    Attributes
    ----------
    client_ids : ndarray of shape (m,), int64
        Every client selected in the round (async: every client whose task
        finished since the previous server update, once each), ascending.
    status : ndarray of shape (m,), str
        One of :data:`CLIENT_STATUSES`.
    duration_s : ndarray of shape (m,), float64
        Virtual seconds from the round's (async: the task's) start to the
        client's completion (compute plus communication), whether or not it
        was aggregated.
    utility : ndarray of shape (m,), float64
        Statistical utility measured on the executor during local training
        (Oort's ``|B_i| sqrt(mean l^2)``, see :func:`hpcbench.fl.engines.training.train_client`);
        NaN for clients that were not trained (stragglers, dropouts).
    num_examples : ndarray of shape (m,), int64
    """

    client_ids: np.ndarray
    status: np.ndarray
    duration_s: np.ndarray
    utility: np.ndarray
    num_examples: np.ndarray


class _Stateful:
    """Explicit state of a strategy, so a checkpoint can save and restore it."""

    def state_dict(self) -> dict[str, Any]:
        """Everything that changes over the run (numpy arrays and Python scalars); empty by default."""
        return {}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restore what :meth:`state_dict` returned.

        Raises
        ------
        ValueError
            ``state`` has keys this strategy does not hold.
        """
        if state:
            raise ValueError(f"{type(self).__name__} holds no state, got keys {sorted(state)}")


class Aggregator(_Stateful, ABC):
    """Server optimizer: turns the round's client updates into the next global model.

    Subclasses set ``Config`` (their config section) and implement
    :meth:`aggregate`; client-side terms (FedProx's proximal term) go through
    :meth:`client_regulariser`, which the executors call during local training.

    Parameters
    ----------
    config : StrategyConfig
        The aggregator's own section of the job config.
    """

    Config: ClassVar[type[StrategyConfig]] = StrategyConfig
    #: whether executors must report ``F_k(w)``, the global model's loss on local data
    needs_global_loss: ClassVar[bool] = False
    #: whether :meth:`aggregate` may be given one pseudo-update of weight 1 in place of the
    #: clients' updates (FedBuff's buffered sum in ``mode: async``); False for an optimizer
    #: that needs per-client quantities (q-FedAvg's ``F_k``)
    accepts_pseudo_gradient: ClassVar[bool] = True

    def __init__(self, config: StrategyConfig) -> None:
        self.config = config

    @abstractmethod
    def aggregate(self, global_params: np.ndarray, deltas: np.ndarray, updates: ClientUpdates,
                  round_: int) -> np.ndarray:
        """New global parameters from one round's client updates.

        Parameters
        ----------
        global_params : ndarray of shape (P,), float32
        deltas : ndarray of shape (m, P), float32
            Local minus global parameters, one row per aggregated client, in
            ascending client id (the sums run in that order, so any world size
            gives the same bits).
        updates : ClientUpdates
        round_ : int
            From 1.

        Returns
        -------
        ndarray of shape (P,), float32
        """

    def client_regulariser(self):
        """Extra local objective added to each client's loss, or None (the default).

        Returns
        -------
        callable or None
            ``term(params, global_params) -> 0-d torch.Tensor`` with ``params``
            the client's trainable tensors and ``global_params`` the same
            tensors at the round's global model (detached).
        """
        return None

    def client_regulariser_gradient(self):
        """The gradient of :meth:`client_regulariser`'s term in numpy, for ``client_training: numpy``.

        An aggregator with a client-side term must give its gradient here for
        the numpy engine to support it (the config refuses the pair
        otherwise); None (the default) means no term, or no numpy form.

        Returns
        -------
        callable or None
            ``grad(params, global_params) -> ndarray`` with ``params`` a stack
            of clients' flat parameter vectors, float32 of shape ``(m, P)``,
            and ``global_params`` the global model's, shape ``(P,)``; the
            result has ``params``' shape and dtype.
        """
        return None


class Selector(_Stateful, ABC):
    """Participant selection, fed back each round's per-client outcome.

    Runs on the aggregator only; it must be deterministic from ``seed`` (and
    the feedback), so that every world size selects the same clients.

    Parameters
    ----------
    config : StrategyConfig
        The selector's own section of the job config.
    seed : int
        The job's seed.
    num_examples : ndarray of shape (num_clients,), int64
        Local example count of every registered client.
    expected_duration_s : ndarray of shape (num_clients,), float64
        Each client's expected round duration on the virtual clock (mean
        device latency and bandwidth of its trace rows), before any feedback.
    work_per_round : int
        Examples a client processes in a round, ``local_steps * batch_size``.
    """

    Config: ClassVar[type[StrategyConfig]] = StrategyConfig

    def __init__(self, config: StrategyConfig, seed: int, num_examples: np.ndarray,
                 expected_duration_s: np.ndarray, work_per_round: int) -> None:
        self.config = config
        self.seed = int(seed)

    @abstractmethod
    def select(self, round_: int, online: np.ndarray, count: int) -> np.ndarray:
        """Up to ``count`` distinct ids among ``online`` (int64, ascending) for round ``round_``."""

    def feedback(self, round_: int, feedback: RoundFeedback) -> None:
        """Take round ``round_``'s outcome (called once per round, after aggregation); no-op by default.

        In ``mode: async`` (FedBuff) it is called at each server update with
        ``round_`` the latest selection number given to :meth:`select`, for
        every client whose task finished since the previous update (see
        :mod:`hpcbench.fl.rounds.fedbuff`).
        """


class FLModel(ABC):
    """What the emulation needs of a model besides ``torch.nn.Module``.

    A model class subclasses both ``torch.nn.Module`` and this, declares the
    ``input_kind`` of the datasets it reads (``features``: float vectors;
    ``tokens``: int64 sequences; ``images``: float32 ``(C, H, W)``) and builds itself from the model config
    section and the dataset.
    """

    input_kind: ClassVar[str]

    @classmethod
    @abstractmethod
    def build(cls, cfg, dataset: FederatedDataset) -> "FLModel":
        """A new model for ``dataset`` from the ``model`` config section (seeded by the caller)."""

    @staticmethod
    @abstractmethod
    def loss(logits, targets):
        """Mean training loss (0-d tensor) that local SGD minimises."""

    @staticmethod
    @abstractmethod
    def sample_losses(logits, targets):
        """Per-example loss, float tensor of shape (B,) (a sequence's mean over its positions)."""

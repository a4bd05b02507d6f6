"""The client-training engine interface: what an engine declares, what it is given, what it writes.

An engine trains a batch of client tasks from their start models and writes
each task's update and metadata into rows of a
:class:`hpcbench.fl.executors.block.ResultBlock`. It declares what it can
train (:meth:`ClientEngine.supports`, :meth:`ClientEngine.problems`), whether
a rank running it imports torch (:attr:`ClientEngine.needs_torch`), and
whether ``client_training: auto`` may choose it
(:attr:`ClientEngine.auto_preference`). Torch-free at import: a config is
validated without torch.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

import numpy as np

if TYPE_CHECKING:
    from hpcbench.fl.contracts import Aggregator, FederatedDataset
    from hpcbench.fl.executors.block import ResultBlock
    from hpcbench.fl.models import ModelEntry
    from hpcbench.fl.settings import LocalTraining

__all__ = ["ClientEngine", "ClientTasks", "EngineJob"]


@dataclass(frozen=True)
class EngineJob:
    """The facts of a job an engine's :meth:`ClientEngine.problems` reads (built by the config).

    Attributes
    ----------
    device : str
        ``cpu``, ``cuda`` or ``auto``.
    mode : str
        The round driver (``sync``, ``async``).
    model_name : str
    model : hpcbench.fl.models.ModelEntry
        Its registry entry (a user's ``module:callable`` model's is ``CALLABLE_MODEL``).
    input_kind : str or None
        What the model reads (``features``, ``images``, ``tokens``): its own,
        else the dataset's; None when neither says.
    compression : tuple of (str, str, bool)
        ``(key, compressor name, enabled)`` of ``uplink_compression`` and ``downlink_compression``.
    compute_cost : str
        ``traces.compute_cost`` (``trace``, ``flops``).
    aggregator_name : str
    aggregator : hpcbench.fl.contracts.Aggregator
        Built from its section: its client-side term is what an engine applies.
    """

    device: str
    mode: str
    model_name: str
    model: ModelEntry
    input_kind: str | None
    compression: tuple
    compute_cost: str
    aggregator_name: str
    aggregator: Aggregator


@dataclass
class ClientTasks:
    """Client tasks to train, in the order their rows are written.

    Attributes
    ----------
    client_ids : ndarray of shape (n,), int64
    streams : ndarray of shape (n,), int64
        Seeds each task's shuffles with its client id: the round, or FedBuff's task number.
    slots : ndarray of shape (n,), int64
        Row of ``models`` each task starts from.
    lr_rounds : ndarray of shape (n,), int64
        The round whose learning rate (:meth:`hpcbench.fl.settings.LocalTraining.learning_rate_of`) the task trains with.
    models : ndarray of shape (v, P), float32
        The distinct start models.
    """

    client_ids: np.ndarray
    streams: np.ndarray
    slots: np.ndarray
    lr_rounds: np.ndarray
    models: np.ndarray

    def __len__(self) -> int:
        return len(self.client_ids)

    @classmethod
    def one_model(cls, client_ids: np.ndarray, round_: int, model: np.ndarray) -> ClientTasks:
        """Every client of ``client_ids`` trains round ``round_`` from ``model`` (float32, shape (P,))."""
        n = len(client_ids)
        full = np.full(n, round_, np.int64)
        return cls(np.asarray(client_ids, np.int64), full, np.zeros(n, np.int64), full, model[None, :])

    def take(self, lo: int, hi: int) -> ClientTasks:
        """Tasks ``lo:hi`` (views), starting from the same ``models``."""
        return ClientTasks(self.client_ids[lo:hi], self.streams[lo:hi], self.slots[lo:hi], self.lr_rounds[lo:hi],
                           self.models)

    def runs(self):
        """Maximal runs of consecutive tasks sharing a start model and a learning-rate round.

        Yields ``(lo, hi, slot, lr_round)``: tasks ``lo:hi`` start from
        ``models[slot]`` and train with round ``lr_round``'s learning rate.
        """
        n, lo = len(self), 0
        for i in range(1, n + 1):
            if i == n or self.slots[i] != self.slots[lo] or self.lr_rounds[i] != self.lr_rounds[lo]:
                yield lo, i, int(self.slots[lo]), int(self.lr_rounds[lo])
                lo = i


class ClientEngine:
    """How an executor trains its clients (one instance per rank, built by the job).

    Subclasses set the class attributes and implement :meth:`train_run`;
    the torch engines also :meth:`evaluate` and give :meth:`test_set` and
    :meth:`initial_parameters` for the server model they train.

    Parameters
    ----------
    model : torch.nn.Module or hpcbench.fl.models.numpy_mlp.NumpyMLP
        The work model (its parameters are overwritten by each task).
    dataset : hpcbench.fl.contracts.FederatedDataset
    local : hpcbench.fl.settings.LocalTraining
    aggregator : hpcbench.fl.contracts.Aggregator
        Its client-side term (FedProx's proximal term) and whether it needs each client's global-model loss.
    """

    name: ClassVar[str]
    #: a rank that trains with it imports torch
    needs_torch: ClassVar[bool] = True
    #: ``client_training: auto`` tries engines with a preference, lowest first; None: only when named
    auto_preference: ClassVar[int | None] = None
    #: what it is, in the job header's words
    description: ClassVar[str] = ""
    #: model input kinds it trains (None: any)
    input_kinds: ClassVar[tuple[str, ...] | None] = None
    #: FL modes (``ROUND_DRIVERS`` names) it runs in (None: any)
    modes: ClassVar[tuple[str, ...] | None] = None
    #: it trains only models whose step is a function of the parameters (``ModelEntry.functional``)
    needs_functional: ClassVar[bool] = False
    #: input kinds and devices for which ``auto`` may pick it (when it has no problems with the job)
    auto_input_kinds: ClassVar[tuple[str, ...]] = ("features", "images", "tokens")
    auto_devices: ClassVar[tuple[str, ...]] = ("cpu", "cuda", "auto")

    def __init__(self, model, dataset: FederatedDataset, local: LocalTraining, aggregator: Aggregator) -> None:
        self.model = model
        self.dataset = dataset
        self.local = local
        self.aggregator = aggregator
        self.trained = 0
        self.train_wall_s = 0.0

    @classmethod
    def supports(cls, model: ModelEntry) -> bool:
        """Whether it trains ``model`` (a ``MODELS`` entry): its input kind and, if needed, a functional step."""
        kind_ok = cls.input_kinds is None or model.input_kind is None or model.input_kind in cls.input_kinds
        return kind_ok and (model.functional or not cls.needs_functional)

    @classmethod
    def problems(cls, job: EngineJob) -> list[str]:
        """What of ``job`` it does not implement (one phrase per setting, naming the key); empty: it can train the job.

        From the declarations: :attr:`modes`, :attr:`input_kinds`, :attr:`needs_functional`.
        """
        problems = []
        if cls.modes is not None and job.mode not in cls.modes:
            problems.append(f"mode {job.mode!r} (needs {' or '.join(map(repr, cls.modes))})")
        if cls.input_kinds is not None and job.input_kind is not None and job.input_kind not in cls.input_kinds:
            problems.append(f"a model reading {job.input_kind} (needs {' or '.join(cls.input_kinds)})")
        if cls.needs_functional and not job.model.functional:
            problems.append("a model whose buffers change in training (BatchNorm's running statistics)")
        return problems

    @classmethod
    def auto_accepts(cls, job: EngineJob) -> bool:
        """Whether ``client_training: auto`` may pick it for ``job``: the job's input kind and device are among
        :attr:`auto_input_kinds` and :attr:`auto_devices`, and it has no :meth:`problems` with it."""
        return job.input_kind in cls.auto_input_kinds and job.device in cls.auto_devices and not cls.problems(job)

    @classmethod
    def _model_problem(cls, job: EngineJob) -> list[str]:
        """The phrase for an unsupported model, listing the models it trains."""
        if cls.supports(job.model):
            return []
        from hpcbench.fl.models import MODELS

        return [f"model {job.model_name!r} ({cls.name} models: "
                f"{', '.join(n for n, m in MODELS.items() if cls.supports(m))})"]

    def train(self, tasks: ClientTasks, block: ResultBlock) -> None:
        """Train every task of ``tasks``; write row ``i`` of ``block`` for task ``i``.

        Runs of tasks sharing a start model and learning rate
        (:meth:`ClientTasks.runs`) go to :meth:`train_run` together.
        Counts the tasks in :attr:`trained` and their wall seconds in :attr:`train_wall_s`.
        Runs inside :func:`hpcbench.runtime.heap.reusing_heap`: under the FL job's fixed mmap
        threshold every training step would otherwise map and fault in its gradients anew.
        """
        from hpcbench.runtime.heap import reusing_heap

        with reusing_heap():  # a training step's gradients and activations reuse the last step's memory
            for lo, hi, slot, lr_round in tasks.runs():
                rows = block.rows(lo, hi)
                self.train_run(tasks.client_ids[lo:hi], tasks.streams[lo:hi], tasks.models[slot],
                               self.local.learning_rate_of(lr_round), rows)
                for wall in rows.train_wall_s.tolist():
                    self.train_wall_s += wall
                self.trained += hi - lo

    def train_run(self, client_ids: np.ndarray, streams: np.ndarray, start: np.ndarray, lr: float,
                  block: ResultBlock) -> None:
        """Train ``client_ids`` (with shuffle streams ``streams``) from ``start`` (float32, (P,)) at ``lr``.

        Writes each client's update and metadata into its row of ``block``.
        """
        raise NotImplementedError

    # -- the server's side: initial parameters and evaluation, computed with this engine's model kind ----------
    @staticmethod
    def initial_parameters(model) -> np.ndarray:
        """``model``'s initial parameters as a new flat float32 array (P,)."""
        raise NotImplementedError

    @staticmethod
    def test_set(dataset: FederatedDataset):
        """The dataset's test inputs and labels in the form :meth:`evaluate` reads."""
        raise NotImplementedError

    @staticmethod
    def evaluate(model, params: np.ndarray, x, y) -> tuple[float, float]:
        """Accuracy and mean loss of ``params`` (float32, (P,)) on ``x``, ``y``."""
        raise NotImplementedError

"""Job configuration of the federated emulation: a YAML file in FedScale's spirit.

The file is parsed once, at the edge, into a typed :class:`FLConfig`; every key
is checked (unknown keys, wrong types and out-of-range values are errors that
name the key and the value). Command-line flags ``--KEY VALUE`` override keys,
with dots for nested keys (``--dataset.alpha 0.1``); values are read as YAML
scalars (``--rounds 5``, ``--traces.availability.format none``).
"""

from __future__ import annotations

import math

from pathlib import Path
from typing import Annotated, Any, Literal, Mapping, Union

from pydantic import BaseModel, BeforeValidator, Field, PrivateAttr, field_validator, model_validator

from hpcbench.fl.aggregation import AGGREGATORS
from hpcbench.fl.config_async import AsyncConfig
from hpcbench.fl.config_compression import CompressionConfig, UplinkCompressionConfig
from hpcbench.fl.data import check_dataset_name, dataset_class
from hpcbench.fl.engines import AUTO, ENGINES, EngineJob, auto_engine
from hpcbench.fl.settings import ClockSettings, FedBuffSettings, FLSettings, LocalTraining, RoundSettings
from hpcbench.fl.limits import MAX_SAMPLE_GRADIENTS, sample_gradients
from hpcbench.fl.models import MODELS, check_model_name, model_entry
from hpcbench.fl.rounds import ROUND_DRIVERS
from hpcbench.fl.selection import SELECTORS
from hpcbench.runtime import config as _config
from hpcbench.runtime.config import ConfigError, Strict, strategy_section

__all__ = ["clock_settings", "fl_settings", "ConfigError", "DatasetConfig", "ModelConfig", "TraceConfig", "TracesConfig",
           "FLConfig", "load_config", "flatten_keys"]


_Strict = Strict


class DatasetConfig(_Strict):
    """Which real dataset, and how it is split across registered clients.

    ``partition``: ``dirichlet`` (label skew with concentration ``alpha``: with
    ``samples_per_client`` each client's class mix ``~ Dir(alpha)``, Hsu et
    al. 2019; disjoint, each class's shares ``~ Dir(alpha)`` over the clients,
    Yurochkin et al. 2019), ``iid``, ``quantity`` (power-law client sizes with exponent
    ``power``, IID labels; LEAF's quantity skew; needs ``samples_per_client:
    null``) or ``natural`` (the dataset's own clients: Shakespeare's roles,
    LEAF's users, FedScale's ``client_id``). With ``samples_per_client`` set, every client draws that
    many samples from its own label distribution (clients may share samples),
    so any number of clients can be registered; unset (``null``), the training
    set is split disjointly. The defaults register a FedScale-like population
    for digits: 1,000 clients of 30 samples each, of which the availability
    trace keeps about 10 % online, so that a round's 13 selected clients are a
    choice among about 100 (with a disjoint split the 1,437 training digits
    allow about 100 clients, all of them selected whenever online).
    A natural partition ignores ``num_clients`` and ``samples_per_client``.

    ``name`` is a registered dataset (``docs/fl.md``: digits, shakespeare,
    fashion_mnist, idx, leaf_femnist, leaf_shakespeare, leaf_sent140,
    leaf_celeba, fedscale) or a user's ``package.module:callable``
    (``docs/byo.md``), resolved when the config is validated.
    """

    name: str = "digits"
    """registered dataset (digits, shakespeare, fashion_mnist, idx, leaf_femnist, leaf_shakespeare, leaf_sent140, leaf_celeba, fedscale) or package.module:callable"""
    path: str | None = None
    """folder of the dataset's files: IDX files (idx, fashion_mnist: default /usr/share/datasets/fashion-mnist), LEAF's data/<dataset>/data (leaf_*), FedScale's data_dir (fedscale)"""
    prefix: str = ""
    """file-name prefix of one IDX set in a folder holding several (EMNIST's emnist-balanced-)"""
    data_map_file: str | None = None
    """FedScale's training client map (default: path/client_data_mapping/train.csv; test.csv beside it)"""
    image_size: int | None = Field(None, ge=4, le=1024)
    """height and width images are resized to (fedscale: default 28; leaf_celeba: default 84)"""
    channels: Literal[1, 3] | None = None
    """colour channels of decoded images (fedscale: default 3, FedScale's RGB)"""
    vocab_size: int = Field(5000, ge=1, le=1_000_000)
    """most frequent training words counted in leaf_sent140's bags of words"""
    options: dict[str, Any] = {}
    """free-form keys for a package.module:callable dataset factory"""
    partition: Literal["dirichlet", "iid", "quantity", "natural"] = "dirichlet"
    """how samples are split across clients: dirichlet (label skew), iid, quantity (power-law sizes), natural (the dataset's own clients)"""
    alpha: float = Field(0.5, gt=0)
    """Dirichlet concentration of the label skew (smaller: more skewed)"""
    power: float = Field(1.5, gt=0, le=100)
    """Pareto shape of partition quantity's client sizes (smaller: heavier tail)"""
    num_clients: int = Field(1000, ge=1, le=100_000_000)
    """registered clients (not with partition natural)"""
    samples_per_client: int | None = Field(30, ge=1, le=1_000_000)
    """samples each client draws from its own label distribution (null: disjoint split of the training set)"""
    test_fraction: float = Field(0.2, gt=0, lt=1)
    """fraction of the dataset held out as the global test set (digits, shakespeare; the others have a test split)"""
    seq_len: int = Field(80, ge=2, le=1024)
    """characters per Shakespeare training sequence"""
    max_test_samples: int = Field(2000, ge=1)
    """largest test set evaluated by the aggregator"""

    _name = field_validator("name")(check_dataset_name)

    @model_validator(mode="after")
    def _check(self):
        if self.samples_per_client is not None and self.num_clients * self.samples_per_client >= 2**31:
            raise ValueError(f"num_clients x samples_per_client = "
                             f"{self.num_clients * self.samples_per_client} sample assignments; at most "
                             f"{2**31 - 1} fit the 32-bit index")
        if self.name == "digits" and self.partition == "natural":
            raise ValueError("partition 'natural' needs a dataset with its own clients (shakespeare, leaf_*, "
                             "fedscale); digits has none")
        if self.name == "shakespeare" and self.partition != "natural":
            raise ValueError(f"dataset 'shakespeare' supports partition 'natural' only, got {self.partition!r}")
        if self.partition == "quantity" and self.samples_per_client is not None:
            raise ValueError(f"partition 'quantity' draws each client's size; set samples_per_client: null "
                             f"(got {self.samples_per_client})")
        if self.name in ("idx", "fedscale") or self.name.startswith("leaf_"):
            if self.path is None:
                raise ValueError(f"dataset {self.name!r} needs path (the folder of its files)")
        if self.data_map_file is not None and self.name != "fedscale":
            raise ValueError(f"data_map_file is FedScale's client map: it needs name 'fedscale', got {self.name!r}")
        return self


class ModelConfig(_Strict):
    """Model to train, a name in ``MODELS`` whose ``input_kind`` matches the dataset's.

    ``mlp``/``logreg`` read feature vectors (digits), ``charlstm`` reads
    character sequences (Shakespeare), ``cnn`` (LEAF's FEMNIST CNN) and
    ``mobilenet_v2`` (torchvision's) read images; ``package.module:callable``
    is a user's factory (``docs/byo.md``).
    """

    name: str = "mlp"
    """registered model: mlp, logreg (features), charlstm (tokens), cnn, mobilenet_v2 (images); or package.module:callable"""
    hidden: int = Field(64, ge=1, le=65536)
    """hidden units (mlp) or LSTM state size (charlstm)"""
    embedding: int = Field(8, ge=1, le=4096)
    """character embedding size (charlstm)"""
    layers: int = Field(1, ge=1, le=8)
    """LSTM layers (charlstm)"""
    hidden_dense: int = Field(2048, ge=1, le=65536)
    """units of the dense layer after the convolutions (cnn; LEAF: 2048)"""
    width: float = Field(1.0, gt=0, le=4)
    """width multiplier of mobilenet_v2's channels"""
    input_size: int | None = Field(None, ge=8, le=1024)
    """mobilenet_v2: height and width inputs are resized to (null: the dataset's)"""
    options: dict[str, Any] = {}
    """free-form keys for a package.module:callable model factory"""

    _name = field_validator("name")(check_model_name)


class TraceConfig(_Strict):
    """One trace: its format and file (``bundled`` = the copy shipped in the package)."""

    format: str
    """trace format registered in hpcbench.traces (none: every client always available / uniform)"""
    path: str = "bundled"
    """trace file, or bundled for the copy shipped with hpcbench"""
    column: Literal["ResNet", "ViT"] = "ResNet"
    """which model's measured latency column of the FLHetBench device trace"""


class TracesConfig(_Strict):
    """Real system-heterogeneity traces driving the virtual clock.

    A client's compute time is ``local_steps * batch_size * latency_s *
    compute_scale`` with ``latency_s`` its device's per-sample training latency;
    its communication time is ``model_bytes * 8 / 1000 / kbps`` each way.

    ``compute_cost``: ``trace`` charges the device trace's latency as
    measured for its reference model (FedScale's behaviour); ``flops``
    multiplies it by the trained model's forward MACs over the reference
    model's (:mod:`hpcbench.fl.compute_cost`), which needs the
    ``flhetbench-device`` trace, whose reference models are known.
    """

    device: TraceConfig = TraceConfig(format="flhetbench-device")
    bandwidth: TraceConfig = TraceConfig(format="mobiperf")
    availability: TraceConfig = TraceConfig(format="flash")
    compute_scale: float = Field(1.0, gt=0)
    """factor on every client's compute time"""
    compute_cost: Literal["trace", "flops"] = "trace"
    """trace: charge the device trace's latency of its reference model as is; flops: scale it by the trained model's forward MACs over the reference model's (ResNet-50 / ViT-B/16)"""

    @model_validator(mode="after")
    def _check(self):
        if self.compute_cost == "flops" and self.device.format != "flhetbench-device":
            raise ValueError(f"compute_cost: 'flops' needs device.format 'flhetbench-device' (its reference "
                             f"models are known), got device.format {self.device.format!r}")
        return self


_SelectionSection, _DEFAULT_SELECTION = strategy_section(SELECTORS, "selection", "random")
_AggregatorSection, _DEFAULT_AGGREGATOR = strategy_section(AGGREGATORS, "aggregator", "fedavg")


def _concurrency(value):
    if value in ("cores", "all") or (type(value) is int and value >= 1):
        return value
    raise ValueError("expected 'cores', 'all' or an integer >= 1")


class FLConfig(_Strict):
    """A federated emulation job (see ``jobs/configs/*.yaml`` for examples).

    The defaults are the digits job of ``jobs/configs/digits.yaml`` (but for
    ``job_name``), which reaches its 0.90 target: the bare command
    ``mpirun -np 64 python -m hpcbench.fl`` is a meaningful benchmark.

    ``executor_concurrency`` bounds how many executors of one node train in a
    round: ``cores`` (default) as many as the node has cores available to
    its executors, ``all`` every executor, or a number. The active executors
    rotate round by round; results do not depend on it (see
    :mod:`hpcbench.fl.executors.pool`).

    ``selection`` and ``aggregator`` are sections ``{name: NAME, ...}`` with
    ``NAME`` registered in ``SELECTORS`` / ``AGGREGATORS`` and the other keys
    those of that class's ``Config`` (``selection: oort`` is short for
    ``selection: {name: oort}``). The client learning rate decays as
    FedScale's: ``x decay_factor`` after every ``decay_round`` rounds, never
    below ``min_learning_rate`` (``decay_factor: 1``, the default, keeps it
    constant; FedScale uses 0.98).

    ``client_training`` names an engine of ``ENGINES``
    (:mod:`hpcbench.fl.engines`), or ``auto`` (the default), which resolves
    at validation to :func:`hpcbench.fl.engines.auto_engine`'s choice:
    ``numpy`` where the torch-free engine trains the job (a model with a
    numpy twin, ``mode: sync``, no compression, ``traces.compute_cost:
    trace``, an aggregator whose client-side term has a numpy gradient) and
    ``sequential`` otherwise; the results
    file (:meth:`record`) and :attr:`engine` hold the engine chosen, and
    :attr:`engine_chosen` says that it was chosen. Versions before ``auto``
    ran ``sequential`` unless told otherwise: ``client_training:
    sequential`` gives their bits.

    ``mode``: ``sync`` (synchronous rounds) or ``async`` (FedBuff, settings in
    ``asynchronous``; see :mod:`hpcbench.fl.asynchronous`), where FedBuff's
    buffered sum goes to the configured aggregator as its pseudo-gradient
    (``fedavg``'s ``server_learning_rate`` is FedBuff's ``eta_g``), so only
    aggregators with ``accepts_pseudo_gradient`` are allowed. ``dropouts``:
    clients offline at their finish time drop out (see
    :mod:`hpcbench.fl.clock`). ``uplink_compression`` / ``downlink_compression``:
    compressed client updates and model broadcasts (see :mod:`hpcbench.fl.uplink`).
    """

    job_name: str = Field("fl", min_length=1, max_length=200, pattern=r"^[A-Za-z0-9_.\-]+$")
    """name of the job, used in the output path and the progress bar"""
    seed: int = Field(1, ge=0, le=2**32 - 1)
    """seed of the data split, the client-to-trace mapping, selection and initial weights"""
    dataset: DatasetConfig = DatasetConfig()
    model: ModelConfig = ModelConfig()
    rounds: int = Field(100, ge=1, le=1_000_000)
    """training rounds"""
    participants: int = Field(10, ge=1)
    """clients aggregated per round (FedScale num_participants)"""
    overcommitment: float = Field(1.3, ge=1.0, le=10.0)
    """participants x this clients are selected; the slowest extra ones are stragglers (FedScale)"""
    local_steps: int = Field(10, ge=1, le=1_000_000)
    """local SGD steps per selected client per round"""
    batch_size: int = Field(16, ge=1, le=1_000_000)
    """local minibatch size"""
    learning_rate: float = Field(0.1, gt=0, le=100)
    """client SGD learning rate"""
    momentum: float = Field(0.0, ge=0, lt=1)
    """client SGD momentum"""
    client_training: str = AUTO
    """auto: numpy where the job allows it, else sequential (the engine chosen is what the results file records); numpy: torch-free engine (mlp/logreg, sync, uncompressed), no rank imports torch; sequential: one torch model per client, one after another (the bits of versions before auto); batched: vmapped together, not bit-identical"""
    device: Literal["cpu", "cuda", "auto"] = "cpu"
    """where the torch engines train clients: cpu; cuda (one GPU per executor rank, the node-local rank modulo the visible GPUs; exit 2 when none is visible; not the numpy engine); auto (cuda where a GPU is visible). Aggregation and evaluation stay on the CPU"""
    decay_factor: float = Field(1.0, gt=0, le=1)
    """client learning rate x this every decay_round rounds (1: constant; FedScale 0.98)"""
    decay_round: int = Field(10, ge=1, le=1_000_000)
    """rounds between learning-rate decays"""
    min_learning_rate: float = Field(5e-5, ge=0, le=100, allow_inf_nan=False)
    """floor of the decayed learning rate"""
    selection: _SelectionSection = _DEFAULT_SELECTION
    aggregator: _AggregatorSection = _DEFAULT_AGGREGATOR
    eval_interval: int = Field(5, ge=1)
    """rounds between test-set evaluations of the global model (the last round is always evaluated)"""
    executor_concurrency: Annotated[Union[str, int], BeforeValidator(_concurrency)] = "cores"
    """executors of a node training at once: cores, all, or a number (results do not depend on it)"""
    client_updates: Literal["rows", "summed"] = "rows"
    """rows: every client's update reaches the aggregator, summed there in client id order (the same bits at any world size); summed: each executor sends the weighted sum of its clients' updates, one model per executor (pfl's aggregation: far less memory and traffic; bits depend on which executor trained which client); summed needs mode sync, an aggregator that takes a pseudo-gradient and no uplink_compression"""
    target_accuracy: float = Field(0.9, gt=0, le=1)
    """test accuracy whose first virtual time is reported as time-to-accuracy"""
    stop_at_target: bool = False
    """end the job at the first evaluation reaching target_accuracy"""
    traces: TracesConfig = TracesConfig()
    mode: str = "sync"
    """sync: synchronous rounds; async: FedBuff buffered asynchronous updates (section asynchronous)"""
    asynchronous: AsyncConfig = AsyncConfig()
    """FedBuff settings, read when mode is async"""
    dropouts: bool = True
    """a client offline (availability trace) at its finish time drops out and its update is discarded"""
    uplink_compression: UplinkCompressionConfig = UplinkCompressionConfig()
    """compressor of client updates, with client-side error feedback; the clock charges its payload bytes"""
    downlink_compression: CompressionConfig = CompressionConfig()
    """compressor of the model sent to clients; the clock charges its payload bytes"""
    output: str = "results/{job_name}-{start}.h5"
    """HDF5 result file; {job_name} and {start} (UTC start time) are filled in"""
    progress: bool = True
    """show a progress bar on rank 0 (stderr)"""
    checkpoint_interval: int = Field(0, ge=0, le=1_000_000)
    """rank 0 writes an atomic checkpoint every this many rounds (async: server updates); 0: never"""
    checkpoint: str = Field("{output}.ckpt", min_length=1)
    """checkpoint file; {output} (the results file) and {job_name} are filled in; --resume FILE continues it"""

    _engine: str = PrivateAttr(AUTO)
    _engine_chosen: bool = PrivateAttr(False)
    _mode = field_validator("mode")(ROUND_DRIVERS.checker())

    @field_validator("client_training")
    @classmethod
    def _engine_name(cls, value: str) -> str:
        return value if value == AUTO else ENGINES.check(value)

    @property
    def engine(self) -> str:
        """The ``ENGINES`` name that trains clients: ``client_training``, or the engine ``auto`` chose."""
        return self._engine

    @property
    def engine_chosen(self) -> bool:
        """True when ``client_training`` is ``auto`` and validation chose :attr:`engine`."""
        return self._engine_chosen

    def record(self) -> dict:
        """The config as the results file and checkpoints keep it: every key, ``client_training`` the engine
        that runs (:attr:`engine`)."""
        return {**self.model_dump(), "client_training": self._engine}

    @model_validator(mode="after")
    def _check(self):
        if self.participants > self.dataset.num_clients and self.dataset.partition != "natural":
            raise ValueError(f"participants ({self.participants}) exceeds dataset.num_clients "
                             f"({self.dataset.num_clients})")
        entry = model_entry(self.model.name)
        model_kind, data_kind = entry.input_kind, dataset_class(self.dataset.name).input_kind
        if model_kind is not None and data_kind is not None and model_kind != data_kind:
            raise ValueError(f"model {self.model.name!r} reads {model_kind} but dataset {self.dataset.name!r} "
                             f"gives {data_kind}; models for it: "
                             f"{', '.join(n for n, m in MODELS.items() if m.input_kind == data_kind)}")
        if ROUND_DRIVERS[self.mode].buffered and not AGGREGATORS[self.aggregator.name].accepts_pseudo_gradient:
            raise ValueError(f"aggregator {self.aggregator.name!r} needs per-client updates and cannot take "
                             f"FedBuff's buffered sum (mode {self.mode!r}); aggregators for it: "
                             f"{', '.join(n for n, a in AGGREGATORS.items() if a.accepts_pseudo_gradient)}")
        if self.client_updates == "summed":
            self._check_summed()
        if self.client_training == AUTO:  # private attributes: the fields stay as given
            self._engine, self._engine_chosen = auto_engine(self.engine_job()), True
        elif self.engine_problems(self.client_training):
            raise ValueError(f"client_training {self.client_training!r} does not support "
                             + "; ".join(self.engine_problems(self.client_training))
                             + f" (model {self.model.name!r})")
        else:
            self._engine = self.client_training
        work = sample_gradients(self)
        if work > MAX_SAMPLE_GRADIENTS:
            per = "asynchronous.buffer_size" if self.mode == "async" else "ceil(participants x overcommitment)"
            clients = work // (self.rounds * self.local_steps * self.batch_size)
            raise ValueError(f"rounds x {per} x local_steps x batch_size = {self.rounds} x {clients} x "
                             f"{self.local_steps} x {self.batch_size} = {work:.3g} "
                             f"sample gradients, more than the {MAX_SAMPLE_GRADIENTS:.0e} a job may ask for "
                             f"(months to years of training); lower rounds, local_steps or batch_size")
        return self

    def _check_summed(self) -> None:
        """``client_updates: summed`` sends no client's own update: refuse what needs one."""
        if ROUND_DRIVERS[self.mode].buffered:
            raise ValueError(f"client_updates 'summed' needs mode 'sync'; mode {self.mode!r} weights each "
                             f"update by its staleness at the server (use client_updates: rows)")
        if not AGGREGATORS[self.aggregator.name].accepts_pseudo_gradient:
            raise ValueError(f"client_updates 'summed': aggregator {self.aggregator.name!r} needs per-client "
                             f"updates; aggregators for it: "
                             f"{', '.join(n for n, a in AGGREGATORS.items() if a.accepts_pseudo_gradient)}")
        if self.uplink_compression.enabled:
            raise ValueError(f"client_updates 'summed' with uplink_compression {self.uplink_compression.name!r}: "
                             f"the server decodes each client's compressed update (and keeps its residual), "
                             f"so every update must reach it (use client_updates: rows)")

    def engine_job(self) -> EngineJob:
        """The facts of this job that a client-training engine's ``problems`` reads."""
        entry = model_entry(self.model.name)
        kind = entry.input_kind if entry.input_kind is not None else dataset_class(self.dataset.name).input_kind
        return EngineJob(self.device, self.mode, self.model.name, entry, kind,
                         tuple((key, getattr(self, key).name, getattr(self, key).enabled)
                               for key in ("uplink_compression", "downlink_compression")),
                         self.traces.compute_cost, self.aggregator.name,
                         AGGREGATORS[self.aggregator.name](self.aggregator))

    def engine_problems(self, name: str) -> list[str]:
        """What of this job engine ``name`` (in ``ENGINES``) does not implement; empty when it can train it."""
        return ENGINES[name].problems(self.engine_job())


def flatten_keys(model: type[BaseModel] = FLConfig, prefix: str = "") -> list[str]:
    """Every leaf key of the FL config, dotted (``dataset.alpha``...)."""
    return _config.flatten_keys(model, prefix)


def load_config(path: str | Path | None = None, overrides: Mapping[str, str] | None = None) -> FLConfig:
    """Read a YAML job file, apply ``--key value`` overrides, validate.

    See :func:`hpcbench.runtime.config.load_config`.

    Raises
    ------
    ConfigError
        Missing, unreadable, empty or unparsable file, unknown key, wrong type
        or out-of-range value; the message names the key and the value.
    """
    return _config.load_config(FLConfig, path, overrides)


def fl_settings(cfg: FLConfig) -> FLSettings:
    """The typed settings of the validated config ``cfg`` (read once, by the job).

    Parameters
    ----------
    cfg : FLConfig
        A validated config.

    Returns
    -------
    hpcbench.fl.settings.FLSettings
        What the round loop, the clock, the engines and the executor pool read.
    """
    selected = math.ceil(cfg.participants * cfg.overcommitment)
    section = cfg.asynchronous
    return FLSettings(
        local=LocalTraining(cfg.seed, cfg.local_steps, cfg.batch_size, cfg.learning_rate, cfg.momentum,
                            cfg.decay_factor, cfg.decay_round, cfg.min_learning_rate),
        clock=clock_settings(cfg),
        rounds=RoundSettings(cfg.mode, cfg.rounds, cfg.participants, selected, cfg.eval_interval,
                             cfg.target_accuracy, cfg.stop_at_target, cfg.checkpoint_interval,
                             cfg.executor_concurrency,
                             getattr(cfg.aggregator, "weighting", "examples") if cfg.client_updates == "summed"
                             else None),
        fedbuff=FedBuffSettings(section.concurrency or selected, section.buffer_size or cfg.participants,
                                section.max_staleness, section.arrival_interval_s),
        engine=cfg.engine, engine_chosen=cfg.engine_chosen)


def clock_settings(cfg: FLConfig) -> ClockSettings:
    """The virtual clock's keys of ``cfg`` (also for scripts that redraw a stored run's clock).

    Parameters
    ----------
    cfg : FLConfig
        A validated config.

    Returns
    -------
    hpcbench.fl.settings.ClockSettings
    """
    return ClockSettings(cfg.seed, cfg.participants, cfg.overcommitment, cfg.local_steps, cfg.batch_size,
                         cfg.dropouts, cfg.traces.compute_scale)

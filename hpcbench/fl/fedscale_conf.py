"""Read a FedScale job file (``benchmark/configs/*/conf.yml``) into hpcbench's FL config keys.

FedScale (Lai et al., ICML'22) describes a job in a YAML file whose
``job_conf`` section is a list of one-key mappings (``- num_participants:
50``), each passed to its aggregator and executors as ``--KEY VALUE``
(``fedscale/cloud/config_parser.py`` lists every key and its default); the
other top-level sections (``ps_ip``, ``worker_ips``, ``auth``,
``setup_commands``...) describe its deployment.

:data:`FEDSCALE_KEYS` is the translation table: each supported ``job_conf``
key, the hpcbench key it sets, FedScale's default where it differs from
hpcbench's (applied when the file omits the key, so a conf.yml means the same
job here as under FedScale), and its meaning. :data:`DEPLOYMENT_KEYS` are keys
that only place, log or accelerate FedScale's processes, and :data:`UNUSED_KEYS`
keys FedScale reads but never uses; both are ignored (the caller prints them
once). Any other key might change what is computed and
hpcbench cannot honour it, so it is refused by name (:class:`ConfigError`,
exit 2) rather than silently dropped. docs/fl.md shows the table.

Deliberate differences from FedScale: ``sample_seed`` becomes hpcbench's one
``seed`` (data split, trace mapping, selection, initial weights), and
``clock_factor`` becomes ``traces.compute_scale`` without FedScale's extra
per-model factor (its ResNet/ShuffleNet/ALBERT models are not bundled).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from hpcbench.fl.aggregation import AGGREGATORS
from hpcbench.fl.data import DATASETS
from hpcbench.fl.models import MODELS
from hpcbench.fl.selection import SELECTORS
from hpcbench.runtime.config import ConfigError, read_yaml_mapping, short_repr

__all__ = ["FedScaleKey", "FEDSCALE_KEYS", "DEPLOYMENT_KEYS", "UNUSED_KEYS", "GRADIENT_POLICIES", "FedScaleJob",
           "read_fedscale_conf", "translate_job_conf"]


@dataclass(frozen=True)
class FedScaleKey:
    """One supported ``job_conf`` key.

    Attributes
    ----------
    target : str
        hpcbench key it sets (dotted; ``selection.*`` / ``aggregator.*`` keys
        apply only under the strategy named by ``needs``).
    kind : {"int", "float", "str", "path"}
        How the value is read (``path``: ``$VARIABLES`` and ``~`` expanded).
    meaning : str
        What the key means, for docs/fl.md.
    default : int, float, str or None
        FedScale's default where it differs from hpcbench's, applied when the
        key is absent; None: hpcbench's default (equal to FedScale's, or
        FedScale's has no counterpart here).
    needs : str or None
        ``"selection:NAME"`` / ``"aggregator:NAME1,NAME2"``: the key only matters
        under that strategy (FedScale ignores it otherwise; so does hpcbench,
        with a note).
    """

    target: str
    kind: str
    meaning: str
    default: Any = None
    needs: str | None = None


_OORT = "selection:oort"
_ADAPTIVE = "aggregator:fedyogi,fedadam,fedadagrad"

#: FedScale ``job_conf`` key -> how it maps onto hpcbench's config.
FEDSCALE_KEYS: dict[str, FedScaleKey] = {
    "data_set": FedScaleKey("dataset.name", "str", "dataset; only the bundled ones are accepted"),
    "model": FedScaleKey("model.name", "str", "model; only hpcbench's registered models are accepted"),
    "num_participants": FedScaleKey("participants", "int", "clients aggregated per round", 4),
    "rounds": FedScaleKey("rounds", "int", "training rounds", 50),
    "local_steps": FedScaleKey("local_steps", "int", "local SGD steps per client per round", 20),
    "batch_size": FedScaleKey("batch_size", "int", "local minibatch size", 30),
    "learning_rate": FedScaleKey("learning_rate", "float", "client learning rate", 0.05),
    "min_learning_rate": FedScaleKey("min_learning_rate", "float", "floor of the decayed learning rate"),
    "decay_factor": FedScaleKey("decay_factor", "float", "learning rate x this every decay_round rounds", 0.98),
    "decay_round": FedScaleKey("decay_round", "int", "rounds between learning-rate decays"),
    "overcommitment": FedScaleKey("overcommitment", "float", "selected = participants x this; extra ones straggle"),
    "eval_interval": FedScaleKey("eval_interval", "int", "rounds between test-set evaluations"),
    "sample_seed": FedScaleKey("seed", "int", "seed (hpcbench has one seed for the whole job)"),
    "clock_factor": FedScaleKey("traces.compute_scale", "float", "factor on every client's compute time"),
    "device_conf_file": FedScaleKey("traces.device", "path",
                                    "FedScale client capacity pickle (compute and bandwidth traces)"),
    "device_avail_file": FedScaleKey("traces.availability", "path", "FedScale client behaviour pickle (availability)"),
    "sample_mode": FedScaleKey("selection.name", "str", "client selection: random or oort"),
    "gradient_policy": FedScaleKey("aggregator.name", "str",
                                   "server optimizer: fed-avg, fed-prox, fed-yogi, q-fedavg (or an hpcbench name)"),
    "yogi_eta": FedScaleKey("aggregator.eta", "float", "server learning rate of FedYoGi", needs=_ADAPTIVE),
    "yogi_tau": FedScaleKey("aggregator.tau", "float", "adaptivity tau of FedYoGi", needs=_ADAPTIVE),
    "yogi_beta": FedScaleKey("aggregator.beta1", "float", "first-moment decay of FedYoGi", needs=_ADAPTIVE),
    "yogi_beta2": FedScaleKey("aggregator.beta2", "float", "second-moment decay of FedYoGi", needs=_ADAPTIVE),
    "proxy_mu": FedScaleKey("aggregator.mu", "float", "FedProx proximal weight mu", needs="aggregator:fedprox"),
    "qfed_q": FedScaleKey("aggregator.q", "float", "q-FedAvg fairness exponent q", needs="aggregator:qfedavg"),
    "exploration_factor": FedScaleKey("selection.exploration_factor", "float", "Oort: initial exploration",
                                      needs=_OORT),
    "exploration_decay": FedScaleKey("selection.exploration_decay", "float", "Oort: exploration decay per round",
                                     needs=_OORT),
    "exploration_min": FedScaleKey("selection.exploration_min", "float", "Oort: exploration floor", needs=_OORT),
    "round_threshold": FedScaleKey("selection.round_threshold", "float",
                                   "Oort: percentile of durations taken as preferred duration", needs=_OORT),
    "round_penalty": FedScaleKey("selection.round_penalty", "float", "Oort: system-penalty exponent alpha",
                                 needs=_OORT),
    "clip_bound": FedScaleKey("selection.clip_bound", "float", "Oort: utility clipping quantile", needs=_OORT),
    "cut_off_util": FedScaleKey("selection.cut_off_util", "float", "Oort: candidate cut-off x cut-off score",
                                needs=_OORT),
    "sample_window": FedScaleKey("selection.sample_window", "float", "Oort: exploration window", needs=_OORT),
    "pacer_step": FedScaleKey("selection.pacer_step", "int", "Oort: rounds per pacer window", needs=_OORT),
    "pacer_delta": FedScaleKey("selection.pacer_delta", "float", "Oort: round_threshold step of the pacer",
                               needs=_OORT),
    "blacklist_rounds": FedScaleKey("selection.blacklist_rounds", "int", "Oort: blacklist after this many rounds",
                                    needs=_OORT),
    "blacklist_max_len": FedScaleKey("selection.blacklist_max_len", "float", "Oort: largest blacklist fraction",
                                     needs=_OORT),
}

#: ``job_conf`` keys that only deploy, log or accelerate FedScale's own processes: ignored.
DEPLOYMENT_KEYS = frozenset({
    "job_name", "log_path", "ps_ip", "ps_port", "worker_ips", "this_rank", "connection_timeout",
    "experiment_mode", "engine", "num_executors", "executor_configs", "use_cuda", "cuda_device", "time_stamp",
    "data_dir", "num_loaders", "test_bsz", "backend", "dump_epoch", "model_zoo", "save_checkpoint",
    "wandb_token", "wandb_entity", "use_wandb",
})

#: ``job_conf`` keys FedScale reads but nothing it computes uses: ignored. ``exploration_alpha`` only
#: appears in a log line of its Oort selector (``thirdparty/oort/oort.py``; the score term that used it
#: is commented out there).
UNUSED_KEYS = frozenset({"exploration_alpha"})

#: FedScale's ``gradient_policy`` spellings -> hpcbench aggregator (an hpcbench name is accepted as is).
GRADIENT_POLICIES = {"fed-avg": "fedavg", "fed-prox": "fedprox", "fed-yogi": "fedyogi", "q-fedavg": "qfedavg"}


@dataclass
class FedScaleJob:
    """A translated FedScale job file.

    Attributes
    ----------
    tree : dict
        Nested hpcbench config keys (``load_config(..., tree=tree)``).
    ignored : list of str
        FedScale keys (top-level sections and ``job_conf`` keys) that had no
        effect here, in file order.
    """

    tree: dict
    ignored: list[str]


def _value(key: str, spec: FedScaleKey, raw: Any) -> Any:
    bad = ConfigError(f"job_conf key {key!r}: bad value {short_repr(raw)} (expected {spec.kind})")
    if isinstance(raw, bool) or raw is None or isinstance(raw, (list, dict)):
        raise bad
    if spec.kind == "int":
        if isinstance(raw, float) and raw.is_integer():
            return int(raw)  # FedScale declares some integer keys as float (decay_round)
        if not isinstance(raw, int):
            raise bad
        return raw
    if spec.kind == "float":
        if not isinstance(raw, (int, float)):
            raise bad
        return float(raw)
    if not isinstance(raw, str):
        raise bad
    if spec.kind == "path":
        path = os.path.expanduser(os.path.expandvars(raw))
        if "$" in path:
            raise ConfigError(f"job_conf key {key!r}: {raw!r} names an unset environment variable")
        return path
    return raw


def _registered(key: str, value: str, registry, what: str, alias: Callable[[str], str] = str) -> str:
    name = alias(value)
    if name not in registry:
        raise ConfigError(f"job_conf key {key!r}: {what} {value!r} is not bundled with hpcbench; "
                          f"available: {', '.join(registry)}")
    return name


def _set(tree: dict, dotted: str, value: Any) -> None:
    *parents, leaf = dotted.split(".")
    for part in parents:
        tree = tree.setdefault(part, {})
    tree[leaf] = value


def translate_job_conf(entries: list, source: str = "job_conf") -> FedScaleJob:
    """Translate FedScale's ``job_conf`` list into hpcbench config keys.

    Parameters
    ----------
    entries : list of dict
        FedScale's ``job_conf``: one-key mappings ``{KEY: VALUE}`` (a later
        entry of the same key wins, as FedScale's ``--KEY VALUE`` flags do).
    source : str
        Name used in messages.

    Returns
    -------
    FedScaleJob

    Raises
    ------
    ConfigError
        ``job_conf`` is not a list of mappings; a key that is neither in
        :data:`FEDSCALE_KEYS`, :data:`DEPLOYMENT_KEYS` nor :data:`UNUSED_KEYS` (named); a value of
        the wrong type; a dataset, model, ``sample_mode`` or ``gradient_policy``
        hpcbench does not have (named, with the available ones).
    """
    if not isinstance(entries, list) or not all(isinstance(e, dict) for e in entries):
        raise ConfigError(f"{source}: 'job_conf' must be a list of one-key mappings (- KEY: VALUE), got "
                          f"{short_repr(entries)}")
    given: dict[str, Any] = {}
    ignored: list[str] = []
    for entry in entries:
        for key, raw in entry.items():
            if key in DEPLOYMENT_KEYS:
                ignored.append(str(key))
            elif key in UNUSED_KEYS:
                ignored.append(f"{key} (unused by FedScale too)")
            elif key in FEDSCALE_KEYS:
                given[key] = _value(key, FEDSCALE_KEYS[key], raw)
            else:
                raise ConfigError(f"{source}: job_conf key {key!r} (value {short_repr(raw)}) is not supported by "
                                  f"hpcbench and may change results; remove it. Supported: "
                                  f"{', '.join(FEDSCALE_KEYS)} (see docs/fl.md)")
    values = {k: spec.default for k, spec in FEDSCALE_KEYS.items() if spec.default is not None}
    values.update(given)
    chosen = {
        "selection": _registered("sample_mode", values.get("sample_mode", "random"), SELECTORS, "sample_mode"),
        "aggregator": _registered("gradient_policy", values.get("gradient_policy", "fed-avg"), AGGREGATORS,
                                  "gradient_policy", lambda v: GRADIENT_POLICIES.get(v, v)),
    }
    tree: dict = {"selection": {"name": chosen["selection"]}, "aggregator": {"name": chosen["aggregator"]}}
    for key, value in values.items():
        spec = FEDSCALE_KEYS[key]
        if spec.needs is not None:
            section, names = spec.needs.split(":")
            if chosen[section] not in names.split(","):
                ignored.append(f"{key} (no effect under {section} {chosen[section]})")
                continue
        if key in ("sample_mode", "gradient_policy"):
            continue
        if key == "data_set":
            value = _registered(key, value, DATASETS, "data_set")
        elif key == "model":
            value = _registered(key, value, MODELS, "model")
        elif key == "device_conf_file":
            _set(tree, "traces.bandwidth", {"format": "fedscale-capacity", "path": value})
            value = {"format": "fedscale-capacity", "path": value}
        elif key == "device_avail_file":
            value = {"format": "fedscale-behavior", "path": value}
        _set(tree, spec.target, value)
    return FedScaleJob(tree, ignored)


def read_fedscale_conf(path: str | Path) -> FedScaleJob:
    """Read a FedScale job file and translate its ``job_conf`` (:func:`translate_job_conf`).

    Top-level sections other than ``job_conf`` (``ps_ip``, ``worker_ips``,
    ``exp_path``, ``auth``, ``setup_commands``...) describe FedScale's
    deployment and are listed in ``ignored``.

    Raises
    ------
    ConfigError
        Missing, unreadable or malformed file, no ``job_conf`` section, or any
        error of :func:`translate_job_conf`; the message names the file and key.
    """
    source = str(path)
    loaded = read_yaml_mapping(path)
    if "job_conf" not in loaded:
        raise ConfigError(f"{source}: no 'job_conf' section; is this a FedScale job file (conf.yml)?")
    job = translate_job_conf(loaded["job_conf"], source)
    job.ignored[:0] = [str(k) for k in loaded if k != "job_conf"]
    return job

"""Read a FedScale job file (``benchmark/configs/*/conf.yml``) into hpcbench's FL config keys, in one pass.

FedScale (Lai et al., ICML'22) describes a job in a YAML file whose
``job_conf`` section is a list of one-key mappings (``- num_participants:
50``), each passed to its aggregator and executors as ``--KEY VALUE``
(``fedscale/cloud/config_parser.py`` lists every key and its default); the
other top-level sections (``ps_ip``, ``worker_ips``, ``auth``,
``setup_commands``...) describe its deployment, but for ``aggregator_entry``,
which names the aggregator: FedScale's asynchronous one
(``async_aggregator.py``) means FedBuff mode here.

The whole file is translated in one pass, and every problem is reported at
once (:class:`ConfigError`, exit 2), each with what to do about it:

- :data:`FEDSCALE_KEYS` is the translation table: each supported key, the
  hpcbench key it sets, FedScale's default where it differs from hpcbench's
  (applied when the file omits the key, so a conf.yml means the same job here
  as under FedScale), and its meaning; :data:`ASYNC_KEYS` are FedScale's
  asynchronous keys, which set FedBuff's (``asynchronous.*``) under the
  asynchronous aggregator and do nothing under the synchronous one, as in
  FedScale;
- :data:`DEPLOYMENT_KEYS` only place, log or accelerate FedScale's processes
  and :data:`UNUSED_KEYS` are read but never used by FedScale: both are
  ignored, listed in one printed note;
- a key whose hpcbench key is set by the YAML job file or a ``--KEY VALUE``
  flag is not read at all (the flag wins, as it does over any file), so
  ``--dataset.name digits`` makes a file naming FedScale's ``femnist`` run;
- any other key might change what is computed and hpcbench cannot honour
  it: it is refused by name, never silently dropped.

FedScale's *meaning*, not only its keys, is translated where hpcbench can
(:attr:`FedScaleJob.notes` says so for every one, and where it cannot):
without ``data_map_file`` FedScale splits the training set IID into
``num_participants`` equal clients (here ``dataset.partition: iid`` with
that many disjoint clients); without ``device_avail_file`` every client is
always available (``traces.availability.format: none``); FedScale's
aggregators average client updates unweighted (``aggregator.weighting:
uniform``). What is only noted: FedScale's own client map of its dataset
(``data_map_file``), its uniform client speeds without ``device_conf_file``,
its removal of clients with fewer than ``filter_less`` or more than
``filter_more`` samples (checked against the real split once the data is
loaded: :func:`client_size_notes`), and its asynchronous aggregator's
division by the sum of staleness weights instead of FedBuff's K.

Deliberate differences from FedScale: ``sample_seed`` becomes hpcbench's one
``seed`` (data split, trace mapping, selection, initial weights), and
``clock_factor`` becomes ``traces.compute_scale`` without FedScale's extra
per-model factor (its ResNet/ShuffleNet/ALBERT models are not bundled).
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping

import numpy as np

from hpcbench.fl.aggregation import AGGREGATORS
from hpcbench.fl.data import DATASETS
from hpcbench.fl.models import MODELS
from hpcbench.fl.selection import SELECTORS
from hpcbench.runtime.config import ConfigError, read_yaml_mapping, short_repr

__all__ = ["FedScaleKey", "FEDSCALE_KEYS", "ASYNC_KEYS", "DEPLOYMENT_KEYS", "UNUSED_KEYS", "GRADIENT_POLICIES",
           "FILTER_DEFAULTS", "FEDSCALE_TYPES", "RENAMED_KEYS", "FedScaleJob", "read_fedscale_conf",
           "translate_job_conf", "client_size_notes"]


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
        ``"selection:NAME"`` / ``"aggregator:NAME1,NAME2"`` / ``"mode:async"``:
        the key only matters under that strategy or mode (FedScale ignores it
        otherwise; so does hpcbench, with a note).
    """

    target: str
    kind: str
    meaning: str
    default: Any = None
    needs: str | None = None


_OORT = "selection:oort"
_ADAPTIVE = "aggregator:fedyogi,fedadam,fedadagrad"
_ASYNC = "mode:async"

#: FedScale ``job_conf`` key -> how it maps onto hpcbench's config.
FEDSCALE_KEYS: dict[str, FedScaleKey] = {
    "data_set": FedScaleKey("dataset.name", "str", "dataset; a bundled one, or override with --dataset.name"),
    "model": FedScaleKey("model.name", "str", "model; a registered one, or override with --model.name"),
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

#: FedScale's asynchronous keys (``config_parser.py``; ``arrival_interval`` and ``async_buffer`` from its
#: ``examples/async_fl``) -> FedBuff's; read under FedScale's asynchronous aggregator only, as FedScale does.
ASYNC_KEYS: dict[str, FedScaleKey] = {
    "max_concurrency": FedScaleKey("asynchronous.concurrency", "int", "clients training at once", 10, _ASYNC),
    "max_staleness": FedScaleKey("asynchronous.max_staleness", "int",
                                 "updates more than this many versions stale are dropped", needs=_ASYNC),
    "async_buffer": FedScaleKey("asynchronous.buffer_size", "int",
                                "updates per server update (FedBuff's K; FedScale's newer aggregator uses "
                                "num_participants, as hpcbench's default)", needs=_ASYNC),
    "arrival_interval": FedScaleKey("asynchronous.arrival_interval_s", "float",
                                    "virtual seconds between two selected clients' starts", needs=_ASYNC),
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

#: FedScale's client-size filters (``client_manager.py``: a client is feasible when filter_less <= size <=
#: filter_more) and their defaults (``config_parser.py``); checked against the split, not applied.
FILTER_DEFAULTS = {"filter_less": 32, "filter_more": 10**15}

#: FedScale's ``gradient_policy`` spellings -> hpcbench aggregator (an hpcbench name is accepted as is).
GRADIENT_POLICIES = {"fed-avg": "fedavg", "fed-prox": "fedprox", "fed-yogi": "fedyogi", "q-fedavg": "qfedavg"}

#: aggregators whose averaging can be made FedScale's unweighted one (``aggregator.weighting``)
_WEIGHTED = ("fedavg", "fedprox", "fedyogi", "fedadam", "fedadagrad")

_KINDS = {"int": "an integer", "float": "a number", "str": "a name", "path": "a path"}

_DATASET_NOTES = {"digits": "8x8 handwritten digits, 10 classes (the closest to FedScale's femnist/emnist)",
                  "shakespeare": "LEAF Shakespeare, next character, one client per speaking role"}


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
    notes : list of str
        Where FedScale's meaning was translated into other hpcbench keys, or
        could not be and differs (printed and stored with the results).
    filters : dict
        FedScale's ``filter_less`` / ``filter_more`` in force (for
        :func:`client_size_notes`, once the split is known).
    """

    tree: dict
    ignored: list[str]
    notes: list[str] = field(default_factory=list)
    filters: dict = field(default_factory=dict)


#: FedScale's own argument types (``fedscale/cloud/config_parser.py``, ``type=`` of each ``--KEY``) where
#: they differ from the kind hpcbench reads: FedScale's driver passes every ``job_conf`` value as the text
#: ``--KEY=VALUE`` and argparse converts it, so a value is read by this type, whatever YAML made of it.
#: ``qfed_q`` is not declared there (its aggregator reads it as a number).
FEDSCALE_TYPES: dict[str, str] = {"decay_round": "float", "arrival_interval": "int", "filter_less": "int",
                                  "filter_more": "int", "total_worker": "int"}

#: FedScale's older names of keys still found in its published job files -> the name it reads now.
RENAMED_KEYS: dict[str, str] = {"total_worker": "num_participants"}

_PARSE = {"int": int, "float": float, "str": str}


def _declared(key: str, kind: str) -> str:
    return FEDSCALE_TYPES.get(key, "str" if kind == "path" else kind)


def _fedscale_value(key: str, raw: Any, kind: str) -> Any:
    """``raw`` as FedScale reads it: the text ``f"{raw}"`` (its driver's ``--KEY=VALUE``) through its declared type.

    So ``3e-3``, a string to YAML 1.1, is the float 0.003, and ``10.0`` is no
    integer for an ``int`` key, exactly as under FedScale. ``kind`` is what
    hpcbench needs (``int``, ``float``, ``str``, ``path``); a key FedScale
    declares ``float`` that hpcbench counts in integers must be whole.

    Raises
    ------
    ValueError
        FedScale's argparse would refuse the text, or it is not whole where hpcbench needs an integer.
    """
    declared = _declared(key, kind)
    text = f"{raw}"
    try:
        value = _PARSE[declared](text)
    except ValueError:
        shown = text if len(text) <= 60 and text.isprintable() else short_repr(text, 60)
        raise ValueError(f"FedScale reads it as --{key}={shown} with {declared}(), which refuses it") from None
    if kind == "int" and declared == "float":
        if not value.is_integer():
            raise ValueError(f"{value!r} is not a whole number")
        return int(value)
    return float(value) if kind == "float" else value


def _expand(raw: str) -> str:
    """A FedScale path with ``$VARIABLES`` and ``~`` expanded; ValueError naming an unset variable."""
    path = os.path.expanduser(os.path.expandvars(raw))
    unset = re.findall(r"\$\{?(\w+)", path)
    if unset:
        raise ValueError(f"names the unset environment variable ${unset[0]}")
    return path


def _set(tree: dict, dotted: str, value: Any) -> None:
    *parents, leaf = dotted.split(".")
    for part in parents:
        tree = tree.setdefault(part, {})
    tree[leaf] = value


def _overridden(target: str, given: Mapping[str, Any]) -> str | None:
    """The YAML file's or command line's key that sets ``target`` (or a key under it), if any."""
    for key in given:
        if key == target or key.startswith(target + ".") or target.startswith(key + "."):
            return key
    return None


class _Translation:
    """State of one pass over a ``job_conf`` list (see :func:`translate_job_conf`)."""

    def __init__(self, source: str, given: Mapping[str, Any], aggregator_entry: str | None,
                 labels: Mapping[str, str]) -> None:
        self.source, self.given, self.labels = source, dict(given), dict(labels)
        self.tree: dict = {}
        self.ignored: list[str] = []
        self.notes: list[str] = []
        self.problems: list[str] = []
        self.asynchronous = aggregator_entry is not None and "async" in Path(str(aggregator_entry)).name

    def label(self, key: str) -> str:
        """Where the override of ``key`` came from (``--KEY``, or the YAML job file's key)."""
        return self.labels.get(key, f"--{key}")

    def problem(self, key: str, raw: Any, what: str, fix: str) -> None:
        self.problems.append(f"{key} {short_repr(raw, 80)}: {what} -> {fix}")

    def set(self, fedscale_key: str, target: str, value: Any, section: bool = False) -> bool:
        """Set ``target`` unless the YAML file or a flag sets it (then note it); True when set.

        ``section``: ``target`` is a strategy section, which keys under it refine rather than replace.
        """
        by = ((target if target in self.given else f"{target}.name" if f"{target}.name" in self.given else None)
              if section else _overridden(target, self.given))
        if by is not None:
            self.ignored.append(f"{fedscale_key} (overridden by {self.label(by)})")
            return False
        _set(self.tree, target, value)
        return True


#: FedScale's image data sets whose own download hpcbench reads (``dataset.name: fedscale``)
FEDSCALE_IMAGE_SETS = ("femnist", "openImg")


def _real_data(t: _Translation, raw_values: Mapping[str, Any]) -> bool:
    """A FedScale image set's own download named by ``data_dir`` (and ``data_map_file``): read it.

    When ``data_set`` is one of :data:`FEDSCALE_IMAGE_SETS` and ``data_dir``
    is a folder whose client map exists (``data_map_file``, default
    ``data_dir/client_data_mapping/train.csv``), the job reads that data with
    its own clients (``dataset.name: fedscale``, ``partition: natural``).
    True when it does; False leaves ``data_set`` to be refused or
    overridden as before.
    """
    name = raw_values.get("data_set")
    if name not in FEDSCALE_IMAGE_SETS or not isinstance(raw_values.get("data_dir"), str) \
            or _overridden("dataset.name", t.given) is not None:
        return False
    try:
        root = _expand(raw_values["data_dir"])
        mapped = raw_values.get("data_map_file")
        map_file = _expand(mapped) if isinstance(mapped, str) else os.path.join(root, "client_data_mapping",
                                                                                  "train.csv")
    except ValueError:   # an unset variable: no download here (data_set is then refused by name, as before)
        return False
    if not os.path.isdir(root) or not os.path.isfile(map_file):
        return False
    for key, target, value in (("data_set", "dataset.name", "fedscale"), ("data_dir", "dataset.path", root),
                               ("data_map_file", "dataset.data_map_file", map_file),
                               ("data_map_file", "dataset.partition", "natural"),
                               ("data_map_file", "dataset.samples_per_client", None)):
        t.set(key, target, value)
    t.notes.append(f"data_dir, data_map_file: FedScale's {name!r} read from {root} with its own clients "
                   f"({map_file}; dataset.name fedscale, partition natural)")
    return True


def _strategy(t: _Translation, key: str, value: str, registry, alias: Callable[[str], str] = str) -> str | None:
    name = alias(value)
    if name in registry:
        return name
    t.problem(key, value, "not in hpcbench", f"use one of {', '.join(registry)}, or remove the key")
    return None


def _named(t: _Translation, key: str, value: str, registry, what: str, flag: str, choices: list[str],
           describe: Mapping[str, str] | None = None) -> None:
    if value in registry:
        t.set(key, FEDSCALE_KEYS[key].target, value)
        return
    by = _overridden(FEDSCALE_KEYS[key].target, t.given)
    if by is not None:
        t.ignored.append(f"{key} {value!r} (overridden by {t.label(by)})")
        return
    listed = "; ".join(f"{c}: {describe[c]}" if describe and c in describe else c for c in choices)
    t.problem(key, value, f"hpcbench does not bundle this {what}", f"pass {flag} NAME ({listed})")


def _traces(t: _Translation, key: str, raw: str, parts: tuple[str, ...], fmt: str) -> None:
    needed = [p for p in parts if _overridden(f"traces.{p}", t.given) is None]
    if not needed:
        t.ignored.append(f"{key} (overridden by {t.label(_overridden(f'traces.{parts[0]}', t.given))})")
        return
    flags = " and ".join(f"--traces.{p}.format / --traces.{p}.path" for p in needed)
    try:
        value = _expand(raw)
    except ValueError as exc:
        t.problem(key, raw, str(exc), f"set it (to FedScale's checkout), or give {flags}")
        return
    if not Path(value).is_file():
        t.problem(key, raw, f"{value!r} is a directory" if Path(value).is_dir() else f"no such file {value!r}",
                  f"give FedScale's {fmt} pickle there, or {flags}")
        return
    for part in needed:
        t.set(key, f"traces.{part}", {"format": fmt, "path": value})


def _meaning(t: _Translation, values: dict, present: set[str], real: bool = False) -> None:
    """FedScale's defaults that mean something other than hpcbench's: translate, or note.

    ``real``: the job reads FedScale's own download (:func:`_real_data`), with its own clients.
    """
    dataset = "fedscale" if real else str(t.given.get("dataset.name", values.get("data_set", "digits")))
    if "data_set" not in present and "dataset.name" not in t.given:
        t.notes.append("no data_set: FedScale's default, cifar10, is not bundled; hpcbench's default dataset "
                       "(digits) runs")
    if "model" not in present and "model.name" not in t.given:
        t.notes.append("no model: FedScale's default, shufflenet_v2_x2_0, is not bundled; hpcbench's default "
                       "model (mlp) runs")
    if real:
        pass
    elif "data_map_file" in present:
        t.notes.append(f"data_map_file: FedScale reads its own client map of {values.get('data_set')!r}; "
                       f"hpcbench splits the bundled {dataset!r} itself (dataset.partition; not FedScale's clients)")
    elif dataset == "digits":
        split = {"dataset.partition": "iid", "dataset.num_clients": values["num_participants"],
                 "dataset.samples_per_client": None}
        if any(_overridden(k, t.given) for k in split):
            t.notes.append("no data_map_file: FedScale splits IID into num_participants clients; the dataset "
                           "keys given here decide the split instead")
        else:
            for k, v in split.items():
                t.set("data_map_file", k, v)
            t.notes.append(f"no data_map_file: IID split into num_participants = {values['num_participants']} "
                           f"disjoint clients, as FedScale (dataset.partition iid)")
    elif dataset == "shakespeare":
        t.notes.append(f"no data_map_file: FedScale would split {dataset!r} IID; hpcbench's {dataset!r} has its "
                       f"natural split (one client per speaking role)")
    if "device_avail_file" not in present and t.set("device_avail_file", "traces.availability", {"format": "none"}):
        t.notes.append("no device_avail_file: every client always available, as FedScale "
                       "(traces.availability.format none)")
    if "device_conf_file" not in present and _overridden("traces.device", t.given) is None:
        t.notes.append("no device_conf_file: FedScale gives every client the same speed; hpcbench uses its "
                       "bundled device and bandwidth traces (heterogeneous clients)")


def _aggregation(t: _Translation, aggregator: str | None) -> None:
    if aggregator is None:
        return
    if t.asynchronous:
        t.set("aggregator_entry", "mode", "async")
        t.notes.append("aggregator_entry names FedScale's asynchronous aggregator: FedBuff mode (mode async); "
                       "FedScale divides the buffered sum by the sum of staleness weights, FedBuff (here) by K")
        return
    if aggregator in _WEIGHTED:
        if t.set("gradient_policy", "aggregator.weighting", "uniform"):
            t.notes.append("FedScale averages client updates unweighted: aggregator.weighting uniform")
    else:
        t.notes.append(f"FedScale averages client updates unweighted; hpcbench's {aggregator} has its own weights")


def _renamed(t: _Translation, key: str, raw: Any, raw_values: dict[str, Any]) -> None:
    """A key under FedScale's older name (``total_worker``): read as the current one, never beside it silently."""
    new = RENAMED_KEYS[key]
    if new in raw_values and f"{raw_values[new]}" != f"{raw}":
        t.problem(key, raw, f"FedScale's older name of {new}, which this file also sets, to "
                            f"{short_repr(raw_values[new], 40)}", f"keep one of {key} and {new}")
        return
    try:
        _fedscale_value(key, raw, "int")
    except ValueError as exc:
        t.problem(key, raw, str(exc), "give an integer")
        return
    raw_values[new] = raw
    t.notes.append(f"{key} {short_repr(raw, 40)}: FedScale's older name of {new}, read as {new}")


def translate_job_conf(entries: list, source: str = "job_conf", given: Mapping[str, Any] | None = None,
                       aggregator_entry: str | None = None, labels: Mapping[str, str] | None = None) -> FedScaleJob:
    """Translate FedScale's ``job_conf`` list into hpcbench config keys, reporting every problem at once.

    Parameters
    ----------
    entries : list of dict
        FedScale's ``job_conf``: one-key mappings ``{KEY: VALUE}`` (a later
        entry of the same key wins, as FedScale's ``--KEY VALUE`` flags do).
    source : str
        Name used in messages.
    given : mapping, optional
        Dotted hpcbench keys (and values) the YAML job file and the command
        line set: FedScale keys aimed at them are not read.
    aggregator_entry : str, optional
        The file's ``aggregator_entry``; FedScale's ``async_aggregator.py``
        means FedBuff mode.
    labels : mapping, optional
        Where each key of ``given`` came from, for the notes (default ``--KEY``).

    Returns
    -------
    FedScaleJob

    Raises
    ------
    ConfigError
        ``job_conf`` is not a list of mappings, or one or more keys cannot be
        honoured: unknown keys, values of the wrong type, a dataset, model,
        ``sample_mode`` or ``gradient_policy`` hpcbench does not have, a path
        naming an unset variable or a missing file. One line per problem,
        each saying what to do.
    """
    if not isinstance(entries, list) or not all(isinstance(e, dict) for e in entries):
        raise ConfigError(f"{source}: 'job_conf' must be a list of one-key mappings (- KEY: VALUE), got "
                          f"{short_repr(entries)}")
    t = _Translation(source, given or {}, aggregator_entry, labels or {})
    raw_values: dict[str, Any] = {}
    renamed: dict[str, Any] = {}
    for entry in entries:
        for key, raw in entry.items():
            (renamed if str(key) in RENAMED_KEYS else raw_values)[str(key)] = raw
    for key, raw in renamed.items():
        _renamed(t, key, raw, raw_values)
    values = {k: spec.default for k, spec in FEDSCALE_KEYS.items() if spec.default is not None}
    present: set[str] = set()
    filters = dict(FILTER_DEFAULTS)
    real = _real_data(t, raw_values)
    for key, raw in raw_values.items():
        spec = FEDSCALE_KEYS.get(key) or ASYNC_KEYS.get(key)
        if real and key in ("data_dir", "data_map_file"):
            continue
        if real and key == "data_set":
            values[key] = raw
            continue
        if key in DEPLOYMENT_KEYS:
            t.ignored.append(key)
        elif key in UNUSED_KEYS:
            t.ignored.append(f"{key} (unused by FedScale too)")
        elif key in FILTER_DEFAULTS:
            try:
                filters[key] = _fedscale_value(key, raw, "int")
            except ValueError as exc:
                t.problem(key, raw, f"not a number of samples: {exc}", "give an integer")
        elif key == "data_map_file":
            present.add(key)
        elif spec is not None:
            try:
                values[key] = _fedscale_value(key, raw, spec.kind)
                present.add(key)
            except ValueError as exc:
                t.problem(key, raw, str(exc), f"give {_KINDS[spec.kind]}")
        else:
            t.problem(key, raw, "not supported by hpcbench and may change results",
                      "remove it from job_conf (supported keys: docs/fl.md)")
    sample_mode = _strategy(t, "sample_mode", str(values.get("sample_mode", "random")), SELECTORS)
    aggregator = _strategy(t, "gradient_policy", str(values.get("gradient_policy", "fed-avg")), AGGREGATORS,
                           lambda v: GRADIENT_POLICIES.get(v, v))
    chosen = {"selection": sample_mode, "aggregator": aggregator, "mode": "async" if t.asynchronous else "sync"}
    for section in ("selection", "aggregator"):
        if chosen[section] is not None:
            t.set("sample_mode" if section == "selection" else "gradient_policy", section,
                  {"name": chosen[section]}, section=True)
    if t.asynchronous and "max_concurrency" not in values:
        values["max_concurrency"] = ASYNC_KEYS["max_concurrency"].default
    for key, value in values.items():
        spec = FEDSCALE_KEYS.get(key) or ASYNC_KEYS[key]
        if spec.needs is not None:
            section, names = spec.needs.split(":")
            if chosen[section] not in names.split(","):
                t.ignored.append(f"{key} (no effect under {section} {chosen[section]})")
                continue
        if key in ("sample_mode", "gradient_policy"):
            continue
        if key == "data_set":
            if not real:
                _named(t, key, value, DATASETS, "dataset", "--dataset.name", list(DATASETS), _DATASET_NOTES)
        elif key == "model":
            data_name = "fedscale" if real else str(t.given.get("dataset.name", values.get("data_set")))
            kind = getattr(DATASETS.get(data_name), "input_kind", None)
            choices = [m for m, e in MODELS.items() if kind is None or e.input_kind == kind]
            _named(t, key, value, MODELS, "model", "--model.name", choices)
        elif key == "device_conf_file":
            _traces(t, key, value, ("device", "bandwidth"), "fedscale-capacity")
        elif key == "device_avail_file":
            _traces(t, key, value, ("availability",), "fedscale-behavior")
        else:
            t.set(key, spec.target, value)
    if not t.problems:
        _meaning(t, values, present, real)
        _aggregation(t, aggregator)
    if t.problems:
        n = len(t.problems)
        raise ConfigError(f"{source}: {n} job_conf key{'s' if n > 1 else ''} cannot be run as written "
                          f"(nothing was started):\n  " + "\n  ".join(t.problems))
    return FedScaleJob(t.tree, t.ignored, t.notes, filters)


def client_size_notes(filters: Mapping[str, Any], sizes: np.ndarray) -> list[str]:
    """What FedScale's client-size filters would have removed from this split (hpcbench keeps every client).

    Parameters
    ----------
    filters : mapping
        ``filter_less`` and ``filter_more`` (:attr:`FedScaleJob.filters`).
    sizes : ndarray of shape (num_clients,), int
        Samples per registered client.

    Returns
    -------
    list of str
        One note: none removed, or how many FedScale would remove.
    """
    if not filters:
        return []
    less, more = filters.get("filter_less", FILTER_DEFAULTS["filter_less"]), filters.get(
        "filter_more", FILTER_DEFAULTS["filter_more"])
    sizes = np.asarray(sizes)
    out = int(np.count_nonzero((sizes < less) | (sizes > more)))
    span = f"{int(sizes.min())}-{int(sizes.max())} samples per client" if sizes.size else "no clients"
    if out == 0:
        return [f"filter_less {less:g}, filter_more {more:g}: no client removed ({span}), as in FedScale"]
    return [f"filter_less {less:g}, filter_more {more:g}: FedScale would remove {out} of {sizes.size} clients "
            f"({span}); hpcbench keeps them all: results differ from FedScale's"]


def read_fedscale_conf(path: str | Path, given: Mapping[str, Any] | None = None,
                       labels: Mapping[str, str] | None = None) -> FedScaleJob:
    """Read a FedScale job file and translate its ``job_conf`` (:func:`translate_job_conf`).

    Top-level sections other than ``job_conf`` (``ps_ip``, ``worker_ips``,
    ``exp_path``, ``auth``, ``setup_commands``...) describe FedScale's
    deployment and are listed in ``ignored``; ``aggregator_entry`` decides
    synchronous or FedBuff mode.

    Raises
    ------
    ConfigError
        Missing, unreadable or malformed file, no ``job_conf`` section, or any
        error of :func:`translate_job_conf`; the message names the file and keys.
    """
    source = str(path)
    loaded = read_yaml_mapping(path, "--fedscale-conf", "fedscale")
    if "job_conf" not in loaded:
        raise ConfigError(f"{source}: no 'job_conf' section; is this a FedScale job file (conf.yml)?")
    entry = loaded.get("aggregator_entry")
    job = translate_job_conf(loaded["job_conf"], source, given, entry if isinstance(entry, str) else None, labels)
    job.ignored[:0] = [str(k) for k in loaded
                       if k != "job_conf" and not (k == "aggregator_entry" and "mode" in job.tree)]
    return job

"""The federated runner's command line: the bare command's defaults and header, ``--help`` generated
from the config model, ``--fedscale-conf`` and ``hpcbench results export --fedscale``."""

from __future__ import annotations

import math
import pickle
import subprocess
import sys

import h5py
import numpy as np
import pytest
from pydantic import Field

from hpcbench.fl.aggregation import AGGREGATORS
from hpcbench.fl.config import FLConfig, flatten_keys
from hpcbench.fl.fedscale_conf import FEDSCALE_KEYS, GRADIENT_POLICIES, read_fedscale_conf, translate_job_conf
from hpcbench.results import read_table
from hpcbench.results_command import main as results_main
from hpcbench.runtime.config import ConfigError, Strict, keys_help, load_config, short_repr
from mpitools import ROOT, run_mpi

DIGITS = ROOT / "jobs" / "configs" / "digits.yaml"

# A FedScale job file in the format of FedScale's benchmark/configs/femnist/conf.yml, with a dataset
# and model hpcbench bundles.
FEDSCALE_CONF = """\
# Configuration file of FAR training experiment
ps_ip: 10.0.0.4
worker_ips:
    - 10.0.0.4:[4]
exp_path: $FEDSCALE_HOME/fedscale/cloud
executor_entry: execution/executor.py
aggregator_entry: aggregation/aggregator.py
auth:
    ssh_user: ""
    ssh_private_key: ~/.ssh/id_rsa
setup_commands:
    - source $HOME/anaconda3/bin/activate fedscale
job_conf:
    - job_name: digits_yogi                 # Generate logs under this folder: log_path/job_name/time_stamp
    - log_path: $FEDSCALE_HOME/benchmark    # Path of log files
    - num_participants: 20                  # Number of participants per round
    - data_set: digits
    - data_dir: $FEDSCALE_HOME/benchmark/dataset/data/digits
    - model: mlp
    - eval_interval: 10
    - rounds: 200
    - num_loaders: 2
    - local_steps: 5
    - learning_rate: 0.05
    - decay_round: 10.0
    - batch_size: 20
    - test_bsz: 20
    - use_cuda: False
    - sample_mode: oort
    - round_threshold: 10
    - pacer_step: 10
    - gradient_policy: fed-yogi
    - yogi_eta: 0.01
    - yogi_tau: 0.001
    - proxy_mu: 0.5
"""


def _help_text(module: str) -> str:
    proc = subprocess.run([sys.executable, "-m", module, "--help"], capture_output=True, text=True, timeout=120,
                          cwd=str(ROOT))
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def _leaf(values: dict, dotted: str):
    for part in dotted.split("."):
        if not isinstance(values, dict) or part not in values:
            return KeyError
        values = values[part]
    return values


# --- the bare command ---------------------------------------------------------------------------

def test_defaults_are_the_digits_job():
    """The bare command runs digits.yaml's job (which reaches 0.90, see README), but for its name."""
    bare = FLConfig().model_dump()
    digits = load_config(FLConfig, DIGITS).model_dump()
    assert bare.pop("job_name") == "fl" and digits.pop("job_name") == "digits-fedavg"
    assert bare == digits
    assert FLConfig().rounds == 100 and FLConfig().learning_rate == 0.1


def test_header_counts_clients_as_the_dataset_does():
    from hpcbench.fl.header import describe

    shakespeare = describe(load_config(FLConfig, ROOT / "jobs" / "configs" / "shakespeare.yaml"), "o.h5", 2, "f")
    assert "one client per speaking role" in shakespeare and "registered clients" not in shakespeare
    assert "1000 registered clients" in describe(FLConfig(), "o.h5", 1, "defaults")


# --- --help -------------------------------------------------------------------------------------

def test_help_lists_every_key_with_default_and_meaning():
    text = _help_text("hpcbench.fl")
    lines = text.splitlines()
    defaults = FLConfig().model_dump()
    defaults["client_training"] = "auto"  # the declared default; a validated config holds the engine auto chose
    for key in flatten_keys(FLConfig):
        heads = [i for i, line in enumerate(lines) if line.startswith(f"  --{key} ")]
        assert heads, f"--help does not list {key}"
        for i in heads:
            assert "(default " in lines[i], lines[i]
            if not lines[i].endswith(")"):
                continue  # the line of a whole strategy section
            assert lines[i + 1].startswith(" " * 8) and lines[i + 1].strip(), f"{key} has no meaning shown"
        value = _leaf(defaults, key)
        if value is not KeyError and not isinstance(value, dict):
            assert f"  --{key} (default {short_repr(value, 60)})" in lines, key
    for name in AGGREGATORS:
        assert f"  aggregator: {{name: {name}}}" in lines
    assert "  --fedscale-conf CONF.yml" in text


def test_pipeline_help_lists_its_keys():
    from hpcbench.pipeline.config import PipelineConfig

    text = _help_text("hpcbench.pipeline")
    for key in flatten_keys(PipelineConfig):
        assert f"  --{key} (default " in text, key


def test_keys_help_reads_descriptions_and_section_defaults():
    class Inner(Strict):
        path: str = "bundled"
        """where it is"""
        fmt: str

    class Outer(Strict):
        rate: float = Field(0.5, description="how fast")
        inner: Inner = Inner(fmt="given")

    lines = keys_help(Outer).splitlines()
    assert lines == ["  --rate (default 0.5)", "        how fast", "  --inner.path (default 'bundled')",
                     "        where it is", "  --inner.fmt (default 'given')"]


def test_attribute_docstrings_are_read_for_help_only_and_inherited():
    from pydantic import create_model

    from hpcbench.runtime.config import attribute_docstrings, field_description

    class Base(Strict):
        size: int = 3
        """how many"""
        plain: int = 1
        noted: float = Field(0.5, description="from the field")
        """not this one"""

    class Child(Base):
        extra: str = "x"
        """a child's own key"""

    made = create_model("Made", __base__=Child, name=(str, "made"))
    assert Base.model_fields["size"].description is None       # nothing read at class creation
    assert attribute_docstrings(Base) == {"size": "how many", "noted": "not this one"}
    assert [field_description(made, k) for k in ("size", "plain", "noted", "extra", "name")] == [
        "how many", "", "from the field", "a child's own key", ""]
    assert attribute_docstrings(made) == {}                     # no source: nothing, no error


# --- --fedscale-conf ----------------------------------------------------------------------------

def test_fedscale_conf_maps_onto_the_config(tmp_path, monkeypatch):
    monkeypatch.setenv("FEDSCALE_HOME", str(tmp_path))
    conf = tmp_path / "conf.yml"
    conf.write_text(FEDSCALE_CONF)
    job = read_fedscale_conf(conf)
    cfg = load_config(FLConfig, None, {"rounds": "30"}, job.tree)  # a flag still overrides
    assert (cfg.participants, cfg.rounds, cfg.local_steps, cfg.batch_size) == (20, 30, 5, 20)
    assert (cfg.learning_rate, cfg.eval_interval, cfg.decay_round) == (0.05, 10, 10)
    assert cfg.decay_factor == 0.98  # FedScale's default where the file is silent
    assert (cfg.dataset.name, cfg.model.name) == ("digits", "mlp")
    assert cfg.selection.name == "oort" and (cfg.selection.round_threshold, cfg.selection.pacer_step) == (10.0, 10)
    assert cfg.selection.clip_bound == 0.9  # Oort's other keys keep FedScale's defaults
    assert cfg.aggregator.name == "fedyogi" and (cfg.aggregator.eta, cfg.aggregator.tau) == (0.01, 0.001)
    assert job.ignored[:6] == ["ps_ip", "worker_ips", "exp_path", "executor_entry", "aggregator_entry", "auth"]
    for key in ("job_name", "log_path", "data_dir", "num_loaders", "test_bsz", "use_cuda"):
        assert key in job.ignored
    assert "proxy_mu (no effect under aggregator fedyogi)" in job.ignored


def test_fedscale_table_targets_are_config_keys():
    from hpcbench.fl.fedscale_conf import ASYNC_KEYS

    keys = set(flatten_keys(FLConfig))
    for key, spec in {**FEDSCALE_KEYS, **ASYNC_KEYS}.items():  # a leaf key, or a trace section ({format, path})
        assert spec.target in keys or f"{spec.target}.format" in keys, key
    assert set(GRADIENT_POLICIES.values()) <= set(AGGREGATORS)


def test_fedscale_traces_and_policies(tmp_path):
    capacity, behave = tmp_path / "client_device_capacity", tmp_path / "client_behave_trace"
    capacity.write_bytes(b"")
    behave.write_bytes(b"")
    job = translate_job_conf([{"device_conf_file": str(capacity)}, {"device_avail_file": str(behave)},
                              {"gradient_policy": "q-fedavg"}, {"qfed_q": 2}, {"clock_factor": 2},
                              {"sample_seed": 7}])
    assert job.tree["traces"] == {
        "device": {"format": "fedscale-capacity", "path": str(capacity)},
        "bandwidth": {"format": "fedscale-capacity", "path": str(capacity)},
        "availability": {"format": "fedscale-behavior", "path": str(behave)},
        "compute_scale": 2.0}
    assert job.tree["aggregator"] == {"name": "qfedavg", "q": 2.0} and job.tree["seed"] == 7
    assert translate_job_conf([{"gradient_policy": "fed-prox"}, {"proxy_mu": 0.3}]).tree["aggregator"] == {
        "name": "fedprox", "mu": 0.3, "weighting": "uniform"}  # FedScale averages unweighted
    oort = translate_job_conf([{"sample_mode": "oort"}, {"exploration_alpha": 0.5}])  # FedScale only logs it
    assert oort.ignored == ["exploration_alpha (unused by FedScale too)"]
    assert "exploration_alpha" not in str(oort.tree)


def test_docs_name_every_fedscale_key():
    from hpcbench.fl.fedscale_conf import ASYNC_KEYS, DEPLOYMENT_KEYS

    doc = (ROOT / "docs" / "fl.md").read_text()
    for key, spec in {**FEDSCALE_KEYS, **ASYNC_KEYS}.items():
        assert f"| `{key}` | `{spec.target}`" in doc, key
    for key in DEPLOYMENT_KEYS:
        assert f"`{key}`" in doc, key


@pytest.mark.parametrize("entries, named", [
    ([{"filter_less": "many"}], "filter_less"),
    ([{"async_mode": True}], "async_mode"),
    ([{"data_set": "femnist"}], "'femnist'"),
    ([{"model": "resnet18"}], "'resnet18'"),
    ([{"sample_mode": "fedbalancer"}], "'fedbalancer'"),
    ([{"gradient_policy": "fed-nova"}], "'fed-nova'"),
    ([{"rounds": "many"}], "rounds 'many'"),
    ([{"learning_rate": True}], "learning_rate True"),
    ({"rounds": 5}, "job_conf"),
])
def test_fedscale_conf_rejects_by_name(entries, named):
    with pytest.raises(ConfigError, match=named):
        translate_job_conf(entries)


def test_fedscale_file_errors(tmp_path, monkeypatch):
    monkeypatch.delenv("FEDSCALE_HOME", raising=False)
    no_job = tmp_path / "a.yml"
    no_job.write_text("ps_ip: 10.0.0.4\n")
    with pytest.raises(ConfigError, match="no 'job_conf'"):
        read_fedscale_conf(no_job)
    unset = tmp_path / "b.yml"
    unset.write_text("job_conf:\n  - device_conf_file: $FEDSCALE_HOME/x\n")
    with pytest.raises(ConfigError, match="device_conf_file"):
        read_fedscale_conf(unset)
    with pytest.raises(ConfigError, match="does not exist"):
        read_fedscale_conf(tmp_path / "absent.yml")


@pytest.mark.mpi
def test_fedscale_conf_unsupported_key_exits_2(tmp_path):
    conf = tmp_path / "conf.yml"
    conf.write_text(FEDSCALE_CONF + "    - noise_factor: 0.2\n")
    out = tmp_path / "never.h5"
    proc = run_mpi(2, ["-m", "hpcbench.fl", "--fedscale-conf", str(conf), "--output", str(out)], timeout=120)
    assert proc.returncode == 2, proc.stderr
    assert "noise_factor 0.2" in proc.stderr and proc.stderr.count("noise_factor") == 1
    assert not out.exists()
    conf.write_text(FEDSCALE_CONF.replace("num_participants: 20", "num_participants: 0"))
    proc = run_mpi(1, ["-m", "hpcbench.fl", "--fedscale-conf", str(conf), "--output", str(out)], timeout=120)
    assert proc.returncode == 2 and "'participants'" in proc.stderr and "num_participants" in proc.stderr
    assert not out.exists()


# --- the bare command's header and the export -----------------------------------------------------

@pytest.fixture(scope="module")
def bare_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("bare") / "bare.h5"
    proc = run_mpi(2, ["-m", "hpcbench.fl", "--rounds", "2", "--eval_interval", "1", "--progress", "false",
                       "--output", str(out)], timeout=240)
    assert proc.returncode == 0, f"stdout:\n{proc.stdout[-3000:]}\nstderr:\n{proc.stderr[-3000:]}"
    return proc, out


@pytest.mark.mpi
def test_bare_command_prints_what_it_runs_once(bare_run):
    proc, out = bare_run
    assert proc.stdout.count("hpcbench fl: job 'fl' from defaults") == 1
    header = proc.stdout[proc.stdout.index("hpcbench fl: job"):]
    for part in ("dataset digits", "30 samples per client", "1000 registered clients", "2 rounds x 10 participants", "selector random",
                 "aggregator fedavg", "device flhetbench-device", f"output {out}", "--KEY VALUE", "--help"):
        assert part in header, part


@pytest.mark.mpi
def test_export_round_trips(bare_run, tmp_path):
    _, run = bare_run
    pkl = tmp_path / "testing_perf"
    assert results_main(["export", "--fedscale", str(run), "-o", str(pkl)]) == 0
    with open(pkl, "rb") as f:
        history = pickle.load(f)
    assert {k: history[k] for k in ("data_set", "model", "sample_mode", "gradient_policy", "task")} == {
        "data_set": "digits", "model": "mlp", "sample_mode": "random", "gradient_policy": "fed-avg", "task": "cv"}
    rounds = read_table(run, "rounds")
    evaluated = ~np.isnan(rounds["test_accuracy"])
    assert list(history["perf"]) == [int(r) for r in rounds["round"][evaluated]] == [1, 2]
    for r, clock, acc, loss in zip(rounds["round"][evaluated], rounds["virtual_time_s"][evaluated],
                                   rounds["test_accuracy"][evaluated], rounds["test_loss"][evaluated]):
        entry = history["perf"][int(r)]
        assert (entry["round"], entry["clock"], entry["top_1"], entry["loss"]) == (r, clock, acc, loss)
        assert type(entry["clock"]) is float and math.isnan(entry["top_5"])
    # an existing output is refused (exit 2) unless --overwrite
    assert results_main(["export", "--fedscale", str(run), "-o", str(pkl)]) == 2
    assert results_main(["export", "--fedscale", str(run), "-o", str(pkl), "--overwrite"]) == 0


def test_export_refuses_bad_inputs(tmp_path, capsys):
    assert results_main(["export", "--fedscale", str(tmp_path / "absent.h5")]) == 2
    assert "absent.h5: no such file" in capsys.readouterr().err
    (tmp_path / "text.h5").write_text("not hdf5")
    assert results_main(["export", "--fedscale", str(tmp_path / "text.h5")]) == 2
    assert "not an HDF5 file" in capsys.readouterr().err
    with h5py.File(tmp_path / "pipe.h5", "w") as h5:
        h5.attrs["kind"] = "pipeline"
        h5.attrs["config_json"] = "{}"
    assert results_main(["export", "--fedscale", str(tmp_path / "pipe.h5")]) == 2
    assert "pipe.h5: not an hpcbench FL result file" in capsys.readouterr().err
    assert not list(tmp_path.glob("*.pkl"))
    with pytest.raises(SystemExit) as exc:
        results_main(["export"])
    assert exc.value.code == 2

"""FedScale's own job files, read in one pass (issue 18 item 16).

``tests/data/fedscale/`` holds FedScale's ``benchmark/configs/femnist/conf.yml``
and ``benchmark/configs/async_fl/async_fl.yml`` unchanged (Apache-2.0, see
``NOTICE.md`` there). Every problem of a file is reported at once with what to
do; flags apply before any refusal; FedScale's asynchronous keys set FedBuff's;
FedScale's meaning (IID split, always-available clients, unweighted
averaging, client-size filters) is translated or noted.
"""

from __future__ import annotations

import pickle
import random

import pytest

from hpcbench.fl.config import FLConfig
from hpcbench.fl.fedscale_conf import client_size_notes, read_fedscale_conf, translate_job_conf
from hpcbench.results import read_attrs, read_table
from hpcbench.runtime.config import ConfigError, load_config
from mpitools import ROOT

DATA = ROOT / "tests" / "data" / "fedscale"
FEMNIST, ASYNC = DATA / "femnist_conf.yml", DATA / "async_fl.yml"
OVERRIDES = {"dataset.name": "digits", "model.name": "mlp"}


@pytest.fixture
def fedscale_home(tmp_path, monkeypatch):
    """$FEDSCALE_HOME with FedScale-format device and behaviour traces (200 clients) where the files expect them."""
    info = tmp_path / "benchmark" / "dataset" / "data" / "device_info"
    info.mkdir(parents=True)
    rng = random.Random(1)
    capacity = {i: {"computation": rng.uniform(5, 50), "communication": rng.uniform(500, 5000)} for i in range(1, 201)}
    behave = {i: {"active": [0.0, 5000.0], "inactive": [3000.0, 8000.0], "finish_time": 10000.0}
              for i in range(1, 201)}
    (info / "client_device_capacity").write_bytes(pickle.dumps(capacity))
    (info / "client_behave_trace").write_bytes(pickle.dumps(behave))
    monkeypatch.setenv("FEDSCALE_HOME", str(tmp_path))
    return tmp_path


@pytest.mark.parametrize("path", [FEMNIST, ASYNC])
def test_every_problem_is_reported_at_once_with_what_to_do(path, monkeypatch):
    monkeypatch.delenv("FEDSCALE_HOME", raising=False)
    with pytest.raises(ConfigError) as info:
        read_fedscale_conf(path)
    text = str(info.value)
    assert "4 job_conf keys cannot be run as written" in text
    for needle in ("data_set 'femnist'", "--dataset.name NAME (digits", "model 'resnet18'", "--model.name NAME",
                   "device_conf_file", "device_avail_file", "$FEDSCALE_HOME", "--traces.availability.format"):
        assert needle in text, needle
    assert text.count("->") == 4  # one remedy per problem


def test_flags_apply_before_any_refusal(fedscale_home):
    job = read_fedscale_conf(FEMNIST, OVERRIDES)
    assert "data_set 'femnist' (overridden by --dataset.name)" in job.ignored
    assert "model 'resnet18' (overridden by --model.name)" in job.ignored
    cfg = load_config(FLConfig, None, OVERRIDES, job.tree)
    assert (cfg.dataset.name, cfg.model.name, cfg.participants, cfg.local_steps, cfg.batch_size) == \
        ("digits", "mlp", 50, 5, 20)
    assert cfg.traces.device.format == "fedscale-capacity" and cfg.traces.availability.format == "fedscale-behavior"
    assert cfg.aggregator.weighting == "uniform"  # FedScale averages unweighted
    assert job.filters["filter_less"] == 21
    assert any("data_map_file" in n for n in job.notes)


def test_async_keys_set_fedbuff_mode(fedscale_home):
    job = read_fedscale_conf(ASYNC, OVERRIDES)
    cfg = load_config(FLConfig, None, OVERRIDES, job.tree)
    assert cfg.mode == "async"
    a = cfg.asynchronous
    assert (a.max_staleness, a.concurrency, a.buffer_size, a.arrival_interval_s) == (5, 100, 50, 5.0)
    assert "aggregator_entry" not in job.ignored and any("FedBuff mode" in n for n in job.notes)
    # under FedScale's synchronous aggregator its async keys do nothing, in FedScale and here
    sync = translate_job_conf([{"max_staleness": 3}, {"async_buffer": 7}], given=OVERRIDES,
                              aggregator_entry="aggregation/aggregator.py")
    assert "mode" not in sync.tree and "max_staleness (no effect under mode sync)" in sync.ignored


def test_fedscale_meaning_translated_or_noted():
    iid = translate_job_conf([{"num_participants": 12}, {"data_set": "digits"}, {"model": "mlp"}])
    assert iid.tree["dataset"] == {"name": "digits", "partition": "iid", "num_clients": 12, "samples_per_client": None}
    assert iid.tree["traces"]["availability"] == {"format": "none"}  # no device_avail_file: always online
    assert iid.tree["aggregator"] == {"name": "fedavg", "weighting": "uniform"}
    cfg = load_config(FLConfig, None, None, iid.tree)
    assert (cfg.dataset.partition, cfg.dataset.num_clients) == ("iid", 12)
    assert any("same speed" in n for n in iid.notes)  # no device_conf_file: noted, not translated
    q = translate_job_conf([{"gradient_policy": "q-fedavg"}, {"data_set": "digits"}])
    assert any("own weights" in n for n in q.notes)
    assert client_size_notes({"filter_less": 21}, [30, 40]) == [
        "filter_less 21, filter_more 1e+15: no client removed (30-40 samples per client), as in FedScale"]
    assert "would remove 1 of 2 clients" in client_size_notes({"filter_less": 32}, [30, 40])[0]


@pytest.mark.parametrize("path, table", [(FEMNIST, "clients"), (ASYNC, "tasks")])
def test_fedscale_files_run_end_to_end(fedscale_home, tmp_path, path, table, capsys):
    from hpcbench.fl.job import FLJob
    from hpcbench.lifecycle import run

    out = tmp_path / f"{path.stem}.h5"
    assert run(FLJob, ["--fedscale-conf", str(path), "--dataset.name", "digits", "--model.name", "mlp",
                       "--rounds", "2", "--progress", "false", "--output", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "FedScale meaning: filter_less 21" in printed
    attrs = read_attrs(out)
    assert attrs["status"] == "completed" and attrs["rounds_completed"] == 2
    assert attrs["config"]["mode"] == ("async" if path == ASYNC else "sync")
    assert "data_map_file" in attrs["fedscale_notes"]
    assert len(read_table(out, table)["client_id"]) > 0


def test_femnist_file_runs_on_its_own_download(fedscale_home, tmp_path, capsys):
    """FedScale's femnist file whose data_dir holds FedScale's layout reads it, with its own clients."""
    from dataset_layouts import write_fedscale
    from hpcbench.fl.job import FLJob
    from hpcbench.lifecycle import run

    written = write_fedscale(fedscale_home / "benchmark" / "dataset" / "data" / "femnist", clients=12)
    out = tmp_path / "femnist.h5"
    assert run(FLJob, ["--fedscale-conf", str(FEMNIST), "--model.name", "cnn", "--model.hidden_dense", "32",
                       "--participants", "4", "--rounds", "1", "--progress", "false", "--output", str(out)]) == 0
    attrs = read_attrs(out)
    assert attrs["config"]["dataset"]["name"] == "fedscale" and attrs["config"]["dataset"]["partition"] == "natural"
    assert attrs["registered_clients"] == len(set(written["train"][0].tolist())) == 12
    assert "with its own clients" in attrs["fedscale_notes"]

"""FedScale job files read with FedScale's meaning (issue 35 part 7; docs/fl.md, ``--fedscale-conf``).

FedScale's driver passes every ``job_conf`` entry as ``--KEY=VALUE`` text and argparse converts it
with the type ``fedscale/cloud/config_parser.py`` declares, so ``yogi_eta: 3e-3`` (a string to
YAML 1.1) is the float 0.003 there, and ``rounds: 10.0`` is refused by ``int()``. ``total_worker``
is FedScale's older name of ``num_participants``; a value the file gives is never replaced by a
default (docs/architecture.md, "Data-safety guarantees": bad input is refused, never reinterpreted).
"""

from __future__ import annotations

import pytest

from hpcbench.fl.config import FLConfig
from hpcbench.fl.fedscale_conf import ASYNC_KEYS, FEDSCALE_KEYS, read_fedscale_conf, translate_job_conf
from hpcbench.runtime.config import ConfigError, load_config


def _cfg(entries):
    return load_config(FLConfig, None, None, translate_job_conf(entries).tree)


def test_exponent_floats_that_yaml_reads_as_strings_are_numbers(tmp_path):
    conf = tmp_path / "conf.yml"
    conf.write_text("job_conf:\n  - gradient_policy: fed-yogi\n  - yogi_eta: 3e-3\n  - yogi_tau: 1e-8\n"
                    "  - learning_rate: 5e-2\n  - clock_factor: 2E0\n")
    job = read_fedscale_conf(conf)
    cfg = load_config(FLConfig, None, None, job.tree)
    assert (cfg.aggregator.eta, cfg.aggregator.tau, cfg.learning_rate) == (0.003, 1e-8, 0.05)
    assert cfg.traces.compute_scale == 2.0


@pytest.mark.parametrize("entries, named", [
    ([{"rounds": 10.0}], "rounds 10.0: FedScale reads it as --rounds=10.0 with int()"),
    ([{"rounds": "1e3"}], "--rounds=1e3 with int()"),
    ([{"num_participants": True}], "--num_participants=True"),
    ([{"learning_rate": "fast"}], "--learning_rate=fast with float()"),
    ([{"decay_round": 2.5}], "2.5 is not a whole number"),
    ([{"filter_less": "1e2"}], "filter_less"),
    ([{"total_worker": "many"}], "--total_worker=many with int()"),
])
def test_values_fedscale_itself_refuses_are_refused_naming_the_key(entries, named):
    with pytest.raises(ConfigError) as info:
        translate_job_conf(entries)
    assert named in str(info.value)


def test_declared_float_integer_keys_and_exact_integers():
    assert _cfg([{"decay_round": 10.0}]).decay_round == 10        # FedScale declares it float
    assert _cfg([{"rounds": "7"}, {"num_participants": 3}]).rounds == 7


def test_total_worker_is_read_as_num_participants():
    job = translate_job_conf([{"total_worker": 100}])
    cfg = load_config(FLConfig, None, None, job.tree)
    assert cfg.participants == 100 and cfg.dataset.num_clients == 100      # not FedScale's default 4
    assert any("total_worker 100: FedScale's older name of num_participants" in n for n in job.notes)
    same = translate_job_conf([{"num_participants": 100}, {"total_worker": 100}])
    assert load_config(FLConfig, None, None, same.tree).participants == 100


@pytest.mark.parametrize("order", [0, 1])
def test_total_worker_beside_a_different_num_participants_is_refused(order):
    entries = [{"total_worker": 100}, {"num_participants": 8}]
    with pytest.raises(ConfigError, match="keep one of total_worker and num_participants"):
        translate_job_conf(entries[::-1] if order else entries)


def _sample(spec):
    return {"int": 7, "float": 0.25}.get(spec.kind)


@pytest.mark.parametrize("key", [k for k, s in FEDSCALE_KEYS.items() if s.kind in ("int", "float")])
def test_no_default_replaces_a_value_the_file_gives(key):
    """Every numeric key given in the file arrives in the config, under the strategy it needs."""
    spec = FEDSCALE_KEYS[key]
    value = _sample(spec)
    entries = [{key: value}]
    if spec.needs == "selection:oort":
        entries.append({"sample_mode": "oort"})
    elif spec.needs:
        entries.append({"gradient_policy": {"aggregator:fedprox": "fed-prox", "aggregator:qfedavg": "q-fedavg"}.get(
            spec.needs, "fed-yogi")})
    tree = translate_job_conf(entries).tree
    node = tree
    for part in spec.target.split("."):
        node = node[part]
    assert node == value, (key, node)


def test_async_keys_use_fedscale_types():
    assert ASYNC_KEYS["arrival_interval"].kind == "float"
    with pytest.raises(ConfigError, match="--arrival_interval=0.5 with int()"):
        translate_job_conf([{"arrival_interval": 0.5}], aggregator_entry="async_aggregator.py")
    job = translate_job_conf([{"arrival_interval": 3}], aggregator_entry="async_aggregator.py")
    assert job.tree["asynchronous"]["arrival_interval_s"] == 3.0

"""Every input bounded (issue 18 items 9-13, 15): what was a hang, a memory blow-up or a traceback is an
input error naming the key, exit status 2, no file (docs/architecture.md, "Data-safety guarantees").

In-process at size 1 (the lifecycle's ``run``); the memory checks compare against this machine's
available memory, so the sizes used are far beyond any machine's. That a bomb is refused without being
expanded is checked by the memory its refusal allocates (``memtools.peak_mb``, load-independent), never by a
bound on wall time.
"""

from __future__ import annotations

import json
import pickle

import pytest

from hpcbench.lifecycle import run
from hpcbench.runtime.bounded import ExpansionError, expanded_size, short_repr
from hpcbench.runtime.config import ConfigError, load_config
from memtools import peak_mb
from mpitools import ROOT

DIGITS = str(ROOT / "jobs" / "configs" / "digits.yaml")


def _job(module: str, cls: str, argv) -> int:
    import importlib

    return run(getattr(importlib.import_module(module), cls), list(argv))


def _fl(argv):
    return _job("hpcbench.fl.job", "FLJob", [DIGITS, "--progress", "false", *argv])


def _bomb(levels: int = 9, width: int = 9) -> str:
    lines = ["a0: &a0 [" + ", ".join(['"lol"'] * width) + "]"]
    for i in range(1, levels):
        lines.append(f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * width) + "]")
    return "\n".join(lines) + "\n"


def _shared(levels: int = 40):
    x: list = [1]
    for _ in range(levels):
        x = [x, x]
    return x


# ------------------------------------------------------------------------ item 9: alias and memo bombs
@pytest.mark.parametrize("key", ["rounds", "dataset.alpha", "selection"])
def test_yaml_alias_bomb_is_refused_without_expanding(tmp_path, key):
    path = tmp_path / "bomb.yaml"
    head, _, leaf = key.rpartition(".")
    body = f"{leaf}: *a8" if not head else f"{head}:\n  {leaf}: *a8"
    path.write_text(_bomb() + body + "\n")
    from hpcbench.fl.config import FLConfig

    peak, error = peak_mb(load_config, FLConfig, path)
    assert isinstance(error, ConfigError) and "expands to more than" in str(error)
    assert peak < 10 and len(str(error)) < 500


def test_recursive_alias_and_command_line_bomb_are_refused():
    from hpcbench.fl.config import FLConfig

    with pytest.raises(ConfigError, match="expands to more than"):
        load_config(FLConfig, None, {"rounds": _flow_bomb()})
    with pytest.raises(ConfigError, match="contains itself"):
        load_config(FLConfig, None, {"rounds": "&r [*r]"})


def _flow_bomb() -> str:
    parts = ["&a [1, 1, 1, 1, 1, 1, 1, 1, 1, 1]"]
    for i in range(1, 6):
        prev = "a" if i == 1 else f"a{i - 1}"
        parts.append(f"&a{i} [" + ", ".join([f"*{prev}"] * 10) + "]")
    return "[" + ", ".join(parts) + "]"


def test_short_repr_of_a_huge_shared_value_is_bounded_and_allocates_little():
    value = _shared(60)  # stands for 2**60 leaves
    peak, error = peak_mb(short_repr, value)
    assert error is None and peak < 1
    text = short_repr(value)
    assert len(text) <= 123
    with pytest.raises(ExpansionError):
        expanded_size(value, 10**6)
    assert expanded_size([[1, 2], {"a": (3, 4)}], 100) == 9  # 1 + (1 + 2) + (1 + 1 + (1 + 2))


def test_pickle_memo_bomb_is_refused_as_a_trace_error(tmp_path):
    from hpcbench.traces import TraceError, load_fedscale_capacity

    path = tmp_path / "client_device_capacity"
    path.write_bytes(pickle.dumps({1: {"computation": _shared(40), "communication": 1.0}}))
    assert path.stat().st_size < 400
    peak, error = peak_mb(load_fedscale_capacity, path)
    assert isinstance(error, TraceError) and "expands to more than" in str(error)
    assert peak < 10


# ----------------------------------------------------------------------------- item 10: deep JSON
def test_deeply_nested_trace_json_exits_2(tmp_path, capsys):
    deep = tmp_path / "deep.json"
    deep.write_text("[" * 100_000 + "]" * 100_000)
    out = tmp_path / "o.h5"
    assert _fl(["--rounds", "1", "--traces.bandwidth.path", str(deep), "--output", str(out)]) == 2
    err = capsys.readouterr().err
    assert "nested too deeply" in err and "traces.bandwidth" in err and "Traceback" not in err
    assert _job("hpcbench.bench.compress.job", "CompressJob", ["--trace", str(deep), "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert "nested too deeply" in err and "--trace" in err and "Traceback" not in err
    assert not out.exists()


# --------------------------------------------------------------------------- item 11: finite floats
def test_infinite_dirichlet_alpha_exits_2(tmp_path, capsys):
    assert _fl(["--dataset.alpha", ".inf", "--output", str(tmp_path / "o.h5")]) == 2
    err = capsys.readouterr().err
    assert "dataset.alpha" in err and "finite" in err
    assert not (tmp_path / "o.h5").exists()


@pytest.mark.parametrize("module, cls, argv", [
    ("hpcbench.bench.compress.job", "CompressJob", ["--alpha", "inf"]),
    ("hpcbench.bench.compress.job", "CompressJob", ["--sizes-mb", "inf"]),
    ("hpcbench.bench.compress.job", "CompressJob", ["--trace-scale", "nan"]),
    ("hpcbench.bench.collectives.job", "CollectivesJob", ["--link-alpha", "nan"]),
    ("hpcbench.bench.costmodel", "CostModelJob", ["--alphas", "inf"]),
    ("hpcbench.bench.costmodel", "CostModelJob", ["--dilation", "inf"]),
])
def test_non_finite_float_flags_exit_2(tmp_path, module, cls, argv, capsys):
    assert _job(module, cls, [*argv, "--output" if "compress" not in module else "--out",
                              str(tmp_path / "o.h5")]) == 2
    err = capsys.readouterr().err
    assert "finite" in err and "Traceback" not in err
    assert not (tmp_path / "o.h5").exists()


# --------------------------------------------------------------------- item 12: sizes against memory
@pytest.mark.parametrize("module, cls, argv, keys", [
    ("hpcbench.train.job", "TrainJob", ["--image_size", "100000"], ["image_size=100000", "memory"]),
    ("hpcbench.pipeline.job", "PipelineJob", ["--model.hidden", "100000000", "--model.heads", "1"],
     ["model.hidden=100000000"]),
    ("hpcbench.pipeline.job", "PipelineJob", ["--model.layers", "1000000"], ["model.layers=1000000"]),
    ("hpcbench.bench.compress.job", "CompressJob", ["--sizes-mb", "100000000"], ["--sizes-mb 1e+08"]),
    ("hpcbench.bench.collectives.job", "CollectivesJob", ["-b", "64G", "-e", "65536G"], ["-e/--maxbytes"]),
])
def test_jobs_that_cannot_fit_exit_2_naming_the_keys(tmp_path, module, cls, argv, keys, capsys):
    out = tmp_path / "o.h5"
    flag = "--out" if "compress" in module else "--output"
    assert _job(module, cls, [*argv, flag, str(out)]) == 2
    err = capsys.readouterr().err
    assert "available" in err and all(k in err for k in keys), err
    assert not out.exists()           # refused before anything was allocated or written


def test_fl_client_split_is_checked_against_the_node(tmp_path, monkeypatch, capsys):
    """The split every rank holds (at most 8.6 GB by the 32-bit index: too small to exceed this machine at
    size 1, so the node is given 1 MB here)."""
    monkeypatch.setattr("hpcbench.runtime.memory.available_bytes", lambda: 10**6)
    assert _fl(["--dataset.num_clients", "100000", "--output", str(tmp_path / "o.h5")]) == 2
    err = capsys.readouterr().err
    assert "dataset.num_clients=100000, dataset.samples_per_client=30" in err and "1e+06" not in err
    assert not (tmp_path / "o.h5").exists()


def test_fl_counts_that_would_run_for_years_exit_2(tmp_path, capsys):
    assert _fl(["--local_steps", "1000000000000", "--output", str(tmp_path / "o.h5")]) == 2
    assert "local_steps" in capsys.readouterr().err
    assert _fl(["--local_steps", "100000", "--rounds", "100000", "--output", str(tmp_path / "o.h5")]) == 2
    assert "sample gradients" in capsys.readouterr().err
    assert not (tmp_path / "o.h5").exists()


def test_pipeline_parameter_count_matches_the_built_layers():
    import torch  # noqa: F401 - the layers are torch's

    from hpcbench.pipeline.config import ModelConfig
    from hpcbench.pipeline.model import build_layers, parameter_count

    cfg = ModelConfig(layers=3, hidden=32, heads=4, seq_len=16, vocab=100, classes=5)
    built = sum(p.numel() for layer in build_layers(cfg, 0) for p in layer.parameters())
    assert parameter_count(cfg) <= built <= parameter_count(cfg) + 2 * cfg.hidden  # the embedding's LayerNorm


# ------------------------------------------------------------------------- item 13: one link config
@pytest.mark.parametrize("kind", ["model", "shared"])
@pytest.mark.parametrize("bandwidth", ["fast", "0Gbit", "-1Gbit"])
def test_pipeline_link_is_checked_as_trains(kind, bandwidth):
    from hpcbench.pipeline.config import load_config as pipeline_config
    from hpcbench.train.config import load_config as train_config

    for load in (pipeline_config, train_config):
        with pytest.raises(ConfigError, match="link.bandwidth"):
            load(None, {"link.kind": kind, "link.bandwidth": bandwidth})


def test_pipeline_link_refuses_trace_replay_and_keeps_its_default():
    from hpcbench.pipeline.config import load_config as pipeline_config
    from hpcbench.train.config import LinkConfig

    assert pipeline_config().link == LinkConfig(bandwidth="1Gbit")
    with pytest.raises(ConfigError, match="link.trace_index"):
        pipeline_config(None, {"link.trace_index": "0"})


def test_pipeline_bad_bandwidth_exits_2_without_a_traceback(tmp_path, capsys):
    assert _job("hpcbench.pipeline.job", "PipelineJob", ["--link.kind", "model", "--link.bandwidth", "fast",
                                                          "--output", str(tmp_path / "o.h5")]) == 2
    err = capsys.readouterr().err
    assert "link.bandwidth" in err and "Traceback" not in err


# ---------------------------------------------------------------------- item 15: who is blamed
def test_command_line_values_are_blamed_on_the_flag_not_the_file(capsys):
    from hpcbench.fl.config import FLConfig

    with pytest.raises(ConfigError) as info:
        load_config(FLConfig, DIGITS, {"rounds": "abc"})
    assert str(info.value).startswith("command line --rounds 'abc': key 'rounds'")
    assert "digits.yaml" not in str(info.value)
    with pytest.raises(ConfigError, match=r"command line --selection.pacer_step 'x': key 'selection.pacer_step'"):
        load_config(FLConfig, None, {"selection": "oort", "selection.pacer_step": "x"})
    with pytest.raises(ConfigError) as info:
        load_config(FLConfig, None, {"executor_concurrency": "{a: 1}"})
    assert "quote it" in str(info.value)


def test_checkpoint_template_on_the_command_line_is_text():
    from hpcbench.fl.config import FLConfig

    assert load_config(FLConfig, None, {"checkpoint": "{output}", "job_name": "123"}).checkpoint == "{output}"


def test_json_trace_with_a_huge_value_gives_a_short_message(tmp_path):
    from hpcbench.traces import TraceError, load_mobiperf

    path = tmp_path / "m.json"
    path.write_text(json.dumps([{"x": "y" * 1_000_000}]))
    with pytest.raises(TraceError) as info:
        load_mobiperf(path)
    assert len(str(info.value)) < 1000

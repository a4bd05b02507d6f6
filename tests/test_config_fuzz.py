"""Fuzzing the config loader: whatever the input, a valid config or a ConfigError, nothing else.

Inputs: mutated YAML text of the bundled job files (and raw bytes), random
trees of YAML values under real and made-up keys, and command-line overrides
of real keys with arbitrary text.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hpcbench.fl.config import FLConfig, flatten_keys
from hpcbench.runtime.config import ConfigError, load_config

ROOT = Path(__file__).resolve().parent.parent
SEEDS = [p.read_text() for p in sorted((ROOT / "jobs" / "configs").glob("*.yaml"))]
KEYS = flatten_keys(FLConfig)
SECTIONS = sorted({k.split(".")[0] for k in KEYS} | {k.rsplit(".", 1)[-1] for k in KEYS})

FUZZ = settings(max_examples=250, deadline=None,
                suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])

scalars = st.one_of(
    st.none(), st.booleans(), st.integers(), st.integers(min_value=-2**70, max_value=2**70),
    st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=30),
    st.sampled_from(["bundled", "digits", "shakespeare", "mlp", "charlstm", "cores", "all", "natural",
                     "iid", "dirichlet", "fedavg", "random", "none", "flash", "mobiperf", "1e400", "-0"]),
)
keys = st.one_of(st.sampled_from(SECTIONS), st.text(max_size=12))
trees = st.recursive(scalars, lambda inner: st.one_of(st.lists(inner, max_size=4),
                                                      st.dictionaries(keys, inner, max_size=6)),
                     max_leaves=25)


def _check(call):
    try:
        cfg = call()
    except ConfigError as exc:
        assert str(exc), "a ConfigError must say what is wrong"
        assert len(str(exc)) < 5000, "error messages stay short whatever the input"
        return None
    assert isinstance(cfg, FLConfig)
    return cfg


@st.composite
def mutated_text(draw):
    text = draw(st.sampled_from(SEEDS))
    for _ in range(draw(st.integers(1, 6))):
        op = draw(st.sampled_from(["insert", "delete", "replace", "duplicate"]))
        pos = draw(st.integers(0, len(text)))
        if op == "insert":
            text = text[:pos] + draw(st.text(max_size=8)) + text[pos:]
        elif op == "delete":
            text = text[:pos] + text[pos + draw(st.integers(1, 20)):]
        elif op == "replace":
            text = text[:pos] + draw(st.sampled_from([":", "-", "[", "{", "&a", "*a", "!!python/object:os.system",
                                                      "\t", "'", '"', "#", "? ", "<<: *a", "\x00"])) + text[pos + 1:]
        else:
            end = draw(st.integers(pos, len(text)))
            text = text[:end] + text[pos:end] + text[end:]
    return text


@FUZZ
@given(text=mutated_text())
def test_mutated_yaml_text(tmp_path_factory, text):
    path = tmp_path_factory.mktemp("fuzz") / "job.yaml"
    path.write_text(text, encoding="utf-8", errors="surrogatepass") if "\ud800" not in text else \
        path.write_bytes(text.encode("utf-8", "replace"))
    _check(lambda: load_config(FLConfig, path))


@FUZZ
@given(data=st.binary(max_size=300))
def test_raw_bytes(tmp_path_factory, data):
    path = tmp_path_factory.mktemp("fuzz") / "job.yaml"
    path.write_bytes(data)
    _check(lambda: load_config(FLConfig, path))


@FUZZ
@given(tree=st.dictionaries(keys, trees, max_size=8))
def test_random_trees(tree):
    _check(lambda: load_config(FLConfig, tree=tree))


@FUZZ
@given(overrides=st.dictionaries(st.sampled_from(KEYS + ["bogus", "dataset.bogus", "rounds.x"]),
                                 st.text(max_size=20), max_size=5))
def test_random_overrides(overrides):
    _check(lambda: load_config(FLConfig, None, overrides))


@pytest.mark.parametrize("content, needle", [
    (b"\xff\xfe rounds: 3\n", "not UTF-8"),
    (b"", "empty"),
    (b"# only a comment\n", "empty"),
    (b"- 1\n- 2\n", "mapping"),
    (b"a: &a [1]\nb: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a]\nc: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b]\n"
     b"d: &d [*c, *c, *c, *c, *c, *c, *c, *c, *c]\nrounds: *d\n", "rounds"),
    (b"[" * 5000, "YAML"),
])
def test_hostile_files_named_errors(tmp_path, content, needle):
    path = tmp_path / "job.yaml"
    path.write_bytes(content)
    with pytest.raises(ConfigError, match=needle) as info:
        load_config(FLConfig, path)
    assert len(str(info.value)) < 2000


def test_directory_and_oversized_file(tmp_path):
    with pytest.raises(ConfigError, match="is a directory"):
        load_config(FLConfig, tmp_path)
    big = tmp_path / "big.yaml"
    big.write_bytes(b"# " + b"x" * (2 << 20) + b"\nrounds: 3\n")
    with pytest.raises(ConfigError, match="bytes"):
        load_config(FLConfig, big)


def test_huge_client_sample_count_is_rejected_before_allocation():
    with pytest.raises(ConfigError, match="samples_per_client"):
        load_config(FLConfig, None, {"dataset.samples_per_client": "100000000"})
    with pytest.raises(ConfigError, match="32-bit"):
        load_config(FLConfig, None, {"dataset.samples_per_client": "1000000", "dataset.num_clients": "5000"})

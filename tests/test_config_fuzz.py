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


# --- bounded inputs (issue 18 item 9, 11): alias bombs and non-finite floats, for every key ----------------
BOMB = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@st.composite
def alias_bombs(draw):
    """A YAML file whose anchors nest ``depth`` levels of ``width`` aliases (billion laughs), sequence or
    merge-key form, placed under a real key; small ones are legal, big ones must be refused fast."""
    width, depth = draw(st.integers(2, 12)), draw(st.integers(1, 12))
    leaf = draw(st.sampled_from(['"lol"', "1", "0.5", "{x: 1}", "[]"]))
    merge = draw(st.booleans())
    lines = [f"a0: &a0 {{k0: {leaf}}}" if merge else f"a0: &a0 [{', '.join([leaf] * width)}]"]
    for i in range(1, depth):
        if merge:
            refs = ", ".join([f"*a{i - 1}"] * width)
            lines.append(f"a{i}: &a{i} {{<<: [{refs}], k{i}: {leaf}}}")
        else:
            lines.append(f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * width)}]")
    key = draw(st.sampled_from(KEYS))
    *parents, last = key.split(".")
    body = "".join(f"{'  ' * n}{p}:\n" for n, p in enumerate(parents)) + f"{'  ' * len(parents)}{last}: *a{depth - 1}"
    return "\n".join(lines) + "\n" + body + "\n", width ** depth


@BOMB
@given(case=alias_bombs())
def test_alias_bombs_are_refused_without_expanding(tmp_path_factory, case):
    from memtools import peak_mb

    text, leaves = case
    path = tmp_path_factory.mktemp("bomb") / "job.yaml"
    path.write_text(text)
    peak, exc = peak_mb(load_config, FLConfig, path)
    assert exc is None or isinstance(exc, ConfigError), exc
    if exc is not None:
        assert len(str(exc)) < 5000
        if leaves > 200_000:
            assert "expands to more than" in str(exc)
    # memory, not wall time: an expanded bomb of more than 200,000 leaves would take tens of megabytes
    assert peak < 64, f"{peak:.1f} MB for {leaves} leaves"


def _float_keys():
    """(overrides selecting the section, dotted key) of every float field of the FL, train and pipeline configs."""
    import typing

    from hpcbench.fl.aggregation import AGGREGATORS
    from hpcbench.fl.selection import SELECTORS
    from hpcbench.pipeline.config import PipelineConfig
    from hpcbench.runtime.config import flatten_keys as keys_of
    from hpcbench.train.config import TrainConfig

    def floats(model, prefix=""):
        from pydantic import BaseModel

        out = []
        for name, field in model.model_fields.items():
            ann = field.annotation
            if isinstance(ann, type) and issubclass(ann, BaseModel):
                out += floats(ann, f"{prefix}{name}.")
            elif ann is float or float in typing.get_args(ann):
                out.append(prefix + name)
        return out

    cases = [(FLConfig, {}, k) for k in floats(FLConfig)]
    cases += [(TrainConfig, {}, k) for k in floats(TrainConfig)]
    cases += [(PipelineConfig, {}, k) for k in floats(PipelineConfig)]
    for section, registry in (("selection", SELECTORS), ("aggregator", AGGREGATORS)):
        for name, cls in registry.items():
            config = getattr(cls, "Config", None)
            if config is not None:
                cases += [(FLConfig, {section: name}, f"{section}.{k}") for k in floats(config)]
    assert len(cases) > 40 and all(k in keys_of(m) for m, _, k in cases)
    return cases


FLOAT_KEYS = _float_keys()


@settings(max_examples=200, deadline=None)
@given(case=st.sampled_from(FLOAT_KEYS),
       text=st.sampled_from([".inf", "-.inf", ".nan", ".NaN", ".Inf", "1.0e+400", "-1.0e+999", "inf", "nan"]))
def test_non_finite_floats_are_refused_for_every_float_key(case, text):
    model, section, key = case
    with pytest.raises(ConfigError) as info:
        load_config(model, None, {**section, key: text})
    assert key in str(info.value)

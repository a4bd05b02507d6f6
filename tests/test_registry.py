"""One registry helper everywhere: an unknown name is the same InputError, listing the registered names."""

from __future__ import annotations

import importlib

import pytest

from hpcbench.runtime.errors import InputError
from hpcbench.runtime.registry import Registry, UnknownName

#: every registry of the project: (module, attribute)
REGISTRIES = [
    ("hpcbench.compress.registry", "REGISTRY"),
    ("hpcbench.collectives.algorithms", "ALGORITHMS"),
    ("hpcbench.collectives.compressed", "COMMUNICATORS"),
    ("hpcbench.allocation", "ALLOCATORS"),
    ("hpcbench.allocation.schedules", "SCHEDULES"),
    ("hpcbench.allocation.milp", "SOLVERS"),
    ("hpcbench.monitors", "MONITORS"),
    ("hpcbench.traces", "TRACE_LOADERS"),
    ("hpcbench.bench.collectives.backends", "BASELINES"),
    ("hpcbench.bench.collectives.gpu", "GPU_BASELINES"),
    ("hpcbench.train.models", "MODELS"),
    ("hpcbench.fl.aggregation", "AGGREGATORS"),
    ("hpcbench.fl.selection", "SELECTORS"),
    ("hpcbench.fl.data", "DATASETS"),
    ("hpcbench.fl.models", "MODELS"),
    ("hpcbench.fl.engines", "ENGINES"),
    ("hpcbench.fl.rounds", "ROUND_DRIVERS"),
    ("hpcbench.cli", "SUBCOMMANDS"),
    ("hpcbench.optim", "OPTIMIZERS"),
    ("hpcbench.controller.batch", "BATCH_SOLVERS"),
    ("hpcbench.controller.estimators", "ESTIMATORS"),
    ("hpcbench.policies", "POLICIES"),
    ("hpcbench.sync", "SYNCHRONISERS"),
]


def _registry(module: str, attr: str) -> Registry:
    return getattr(importlib.import_module(module), attr)


@pytest.mark.parametrize("module,attr", REGISTRIES)
def test_every_registry_refuses_an_unknown_name_listing_the_registered_ones(module, attr):
    reg = _registry(module, attr)
    assert isinstance(reg, Registry) and len(reg) > 0, (module, attr)
    with pytest.raises(UnknownName) as err:
        reg["no-such-method"]
    assert isinstance(err.value, InputError) and isinstance(err.value, KeyError)
    msg = str(err.value)
    assert msg.startswith(f"unknown {reg.kind} 'no-such-method'; registered: ")
    assert all(name in msg for name in reg), msg
    assert reg.check(next(iter(reg))) == next(iter(reg))
    assert reg.get("no-such-method") is None        # a dict still: get() and `in` do not raise


def test_synchronisers_and_the_lookups_built_on_registries_raise_the_same_error():
    from hpcbench.allocation import allocate
    from hpcbench.collectives.algorithms import get as algorithm
    from hpcbench.compress.registry import create
    from hpcbench.monitors import build_monitor
    from hpcbench.sync import get as sync
    from hpcbench.traces import load_trace

    for call, kind in [(lambda: sync("warp"), "synchroniser"), (lambda: algorithm("warp"), "allreduce algorithm"),
                       (lambda: create("warp"), "compressor"), (lambda: build_monitor("warp"), "monitor"),
                       (lambda: load_trace("warp"), "trace format"), (lambda: allocate("warp", None), "allocator")]:
        with pytest.raises(UnknownName, match=f"^unknown {kind} 'warp'; registered: "):
            call()


def test_register_refuses_a_taken_name_and_works_as_a_decorator():
    reg = Registry("thing", {"a": 1})

    @reg.register("f")
    def f():
        return 2

    assert reg["f"] is f and list(reg) == ["a", "f"]
    with pytest.raises(ValueError, match="thing 'a' is already registered"):
        reg.register("a", 3)
    assert Registry("thing").unknown("x") == "unknown thing 'x'; registered: none"

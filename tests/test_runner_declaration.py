"""A runner is one line of ``cli.SUBCOMMANDS`` and its own declaration module: a toy one, declared from
``tests/``, is known to ``hpcbench reproduce`` (with its way of taking settings) and its files' headline figures
and TensorBoard scalars come from its declaration, with no other file changed."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

import numpy as np
import pytest

from hpcbench import cli
from hpcbench.results.kinds import KINDS

sys.path.insert(0, str(Path(__file__).resolve().parent))


@pytest.fixture
def toy(monkeypatch):
    monkeypatch.setitem(cli.SUBCOMMANDS, "toy", cli.Subcommand("toy_runner", "a toy runner", "toy_runner"))
    yield
    KINDS.pop("toy", None)
    sys.modules.pop("toy_runner", None)


def test_a_toy_runner_declared_from_the_tests_is_read_by_reproduce_and_results(toy, tmp_path):
    from hpcbench.reproduce.manifest import runners
    from hpcbench.results import Column, ResultsFile
    from hpcbench.results.headlines import headlines
    from hpcbench.results.tensorboard import scalars

    assert cli.load_declarations()["toy"].kind == "toy"
    assert runners()["toy"] == "flags"
    path = tmp_path / "toy.h5"
    with ResultsFile(path, "toy", {"steps": 2}) as results:
        table = results.table("steps", [Column("step", "int64", "1"), Column("worker", "str", ""),
                                        Column("loss", "float64", "1")])
        table.append({"step": [0, 1], "worker": ["a", "a"], "loss": [2.0, 0.5]})
    assert [(h.name, h.value) for h in headlines(path)] == [("last loss", 0.5)]
    rows = {"step": np.array([0, 1]), "worker": np.array(["a", "a"]), "loss": np.array([2.0, 0.5])}
    assert [(s.tag, s.value, s.step) for s in scalars("toy", "steps", rows)] == [("steps/loss/a", 2.0, 0),
                                                                                ("steps/loss/a", 0.5, 1)]
    assert list(scalars("toy", "other", rows)) == []


def test_every_declared_runner_has_its_subcommands_name_and_its_jobs_kind():
    """The kind a runner's files carry is its subcommand's name, and its Job takes it from its declaration."""
    from hpcbench.lifecycle import Job

    declared = cli.load_declarations()
    assert set(declared) == {"fl", "collectives", "compress", "pipeline", "costmodel", "train"}
    jobs = {"fl": "hpcbench.fl.job", "train": "hpcbench.train.job", "pipeline": "hpcbench.pipeline.job",
            "collectives": "hpcbench.bench.collectives.job", "compress": "hpcbench.bench.compress.job",
            "costmodel": "hpcbench.bench.costmodel"}
    for name, module in jobs.items():
        kinds = {cls.kind for cls in vars(importlib.import_module(module)).values()
                 if isinstance(cls, type) and issubclass(cls, Job) and cls is not Job}
        assert kinds == {name}, module


def test_a_kind_is_declared_once():
    from hpcbench.results.kinds import RunnerKind, declare

    cli.load_declarations()
    with pytest.raises(ValueError, match="'train' is already declared"):
        declare(RunnerKind("train", "config"))

"""Bring your own model and dataset: ``package.module:callable`` names (tests/byo_user.py), checked, recorded."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import pytest
from pydantic import ValidationError

from hpcbench.fl.config import FLConfig
from hpcbench.results import read_attrs, read_table
from mpitools import run_mpi

HERE = Path(__file__).resolve().parent
ENV = {"PYTHONPATH": os.pathsep.join([str(HERE), os.environ.get("PYTHONPATH", "")])}
JOB = ["-m", "hpcbench.fl", "--dataset.name", "byo_user:blobs", "--dataset.partition", "natural",
       "--model.name", "byo_user:small_net", "--rounds", "6", "--participants", "5", "--local_steps", "3",
       "--eval_interval", "3", "--progress", "false", "--traces.availability.format", "none"]


@pytest.mark.parametrize("key,name,message", [
    ("model", "no_such_module_xyz:make", "cannot import module 'no_such_module_xyz'"),
    ("model", "byo_user:nothing", "has no attribute 'nothing'"),
    ("model", "byo_user:NOT_CALLABLE", "not callable"),
    ("dataset", "byo_user:missing", "has no attribute 'missing'"),
])
def test_unknown_callables_refused_at_validation(key, name, message, monkeypatch):
    monkeypatch.syspath_prepend(str(HERE))
    with pytest.raises(ValidationError, match=message) as err:
        FLConfig.model_validate({key: {"name": name}})
    assert f"{key}.name" in str(err.value)


@pytest.mark.mpi
def test_user_model_and_dataset_job(tmp_path):
    out = tmp_path / "byo.h5"
    proc = run_mpi(2, [*JOB, "--model.options", "{hidden: 12}", "--output", str(out)], timeout=240, env=ENV)
    assert proc.returncode == 0, proc.stderr[-3000:]
    attrs = read_attrs(out)
    assert attrs["registered_clients"] == 20                 # the factory's natural partition
    assert attrs["num_parameters"] == 6 * 12 + 12 + 12 * 4 + 4
    recorded = {r["callable"]: r for r in json.loads(attrs["user_callables"])}
    for name in ("byo_user:blobs", "byo_user:small_net"):
        assert recorded[name]["file"] == str(HERE / "byo_user.py")
        assert recorded[name]["sha256"] == hashlib.sha256((HERE / "byo_user.py").read_bytes()).hexdigest()
    acc = read_table(out, "rounds")["test_accuracy"]
    assert acc[-1] > 0.5                                      # four separable blobs: it learned


@pytest.mark.mpi
@pytest.mark.parametrize("flags,message", [
    (["--model.name", "byo_user:wrong_output"], "expected float logits of shape (2, 4)"),
    (["--model.name", "byo_user:not_a_module"], "returned a str; expected a torch.nn.Module"),
    (["--dataset.name", "byo_user:wrong_dtype"], "y_train must be int64"),
    (["--model.name", "no_such_module_xyz:make"], "cannot import module"),
])
def test_broken_contract_exits_2(tmp_path, flags, message):
    out = tmp_path / "bad.h5"
    proc = run_mpi(2, [*JOB, *flags, "--output", str(out)], timeout=240, env=ENV)
    assert proc.returncode == 2, proc.stderr[-3000:]
    assert message in proc.stdout + proc.stderr
    assert not out.exists()

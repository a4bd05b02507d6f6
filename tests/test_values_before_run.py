"""Every value that can be checked before the run is (issue 35 part 4): exit 2 naming the key and value.

docs/architecture.md, "Data-safety guarantees" (bad input; input bounds): products of values (sizes x
iterations x implementations) against memory and a time bound (``runtime/budget.py``), and the
consistency of bounds (StellaTrain's ``min_batch`` against ``max_batch``, an elastic keep_global
batch against the most workers it will be split over) are refused before anything is allocated or
launched. In-process at size 1 (the lifecycle's ``run``).
"""

from __future__ import annotations

import importlib
from types import SimpleNamespace

import pytest

from hpcbench.lifecycle import run
from hpcbench.runtime.budget import MAX_RUN_S, check_run_time
from hpcbench.runtime.errors import InputError
from mpitools import ROOT


def _job(module: str, cls: str, argv) -> int:
    return run(getattr(importlib.import_module(module), cls), list(argv))


CASES = [  # (module, class, argv, what the one message names)
    ("hpcbench.bench.collectives.job", "CollectivesJob", ["-n", str(10**12), "-b", "1K", "-e", "1K"],
     "-n/--iters 1000000000000"),
    ("hpcbench.bench.collectives.job", "CollectivesJob", ["-w", str(10**13)], "-w/--warmup 10000000000000"),
    ("hpcbench.bench.compress.job", "CompressJob", ["--sizes-mb", "1e-9"], "--sizes-mb 1e-09"),
    ("hpcbench.bench.compress.job", "CompressJob", ["--threads", "100000"], "--threads 100000"),
    ("hpcbench.bench.compress.job", "CompressJob", ["--repeats", str(10**12)], "--repeats 1000000000000"),
    ("hpcbench.bench.compress.job", "CompressJob", ["--convergence", "--steps", str(10**13)],
     "--steps 10000000000000"),
    ("hpcbench.bench.costmodel", "CostModelJob", ["--reps", str(10**12)], "--reps 1000000000000"),
    ("hpcbench.bench.costmodel", "CostModelJob", ["--reps", "1000", "--dilation", "1e9"], "--dilation 1e+09"),
    ("hpcbench.bench.costmodel", "CostModelJob", ["--sizes-mb", "1e-9"], "sizes-mb: 1e-09 MB"),
    ("hpcbench.bench.fl_scaling", "FLScalingJob", ["--np", "2,2", "--flower", "none"], "--np 2,2"),
    ("hpcbench.bench.fl_scaling", "FLScalingJob", ["--np", "1,2", "--flower", "/bin/false"],
     "--flower: '/bin/false' cannot import flwr and ray"),
]


@pytest.mark.parametrize("module, cls, argv, named", CASES, ids=[" ".join(c[2])[:40] for c in CASES])
def test_values_refused_before_the_run(tmp_path, capsys, module, cls, argv, named):
    out = tmp_path / "o.h5"
    flag = "--out" if cls == "CompressJob" else "--output"
    assert _job(module, cls, [*argv, flag, str(out)]) == 2
    err = capsys.readouterr().err
    assert named in err and "Traceback" not in err and not out.exists(), err


def test_the_time_bound_is_stated():
    check_run_time(MAX_RUN_S, "--x 1")
    with pytest.raises(InputError, match=r"--x 2: the run would take at least 14 days.* bound of 7 days"):
        check_run_time(2 * MAX_RUN_S, "--x 2")
    with pytest.raises(InputError, match="--x nan"):
        check_run_time(float("nan"), "--x nan")


def test_stellatrain_min_batch_above_max_batch_exits_2(tmp_path, capsys):
    cfg = tmp_path / "st.yaml"
    cfg.write_text("policies:\n  - {name: stellatrain, min_batch: 64, max_batch: 8}\n")
    assert _job("hpcbench.train.job", "TrainJob", [str(cfg), "--progress", "false", "--output",
                                                   str(tmp_path / "o.h5")]) == 2
    err = capsys.readouterr().err
    assert "min_batch 64 exceeds max_batch 8" in err and not (tmp_path / "o.h5").exists()
    from hpcbench.policies.stellatrain import StellaTrain

    with pytest.raises(ValueError, match="min_batch 16 exceeds max_batch 8"):
        StellaTrain.Config(min_batch=16, max_batch=[32, 8])
    assert StellaTrain.Config(min_batch=8, max_batch=[32, 8]).min_batch == 8


def _elastic(**kw):
    from hpcbench.train.config import ElasticConfig

    return ElasticConfig(**kw)


@pytest.mark.parametrize("batch, elastic, ok", [
    (1, dict(schedule="0:1, 5:4"), False),                     # the job: fails at step 5 today
    (4, dict(schedule="0:1, 5:4"), True),
    (1, dict(schedule="0:1, 5:4", batch="keep_local"), True),
    (1, dict(workers=1), False),                                # a policy may grow it to every rank
    (2, dict(workers=2), True),
])
def test_elastic_keep_global_batch_against_the_most_workers(batch, elastic, ok):
    from hpcbench.train.job import TrainJob

    job = SimpleNamespace(comm=SimpleNamespace(size=4), cfg=SimpleNamespace(batch_size=batch))
    if ok:
        TrainJob._check_elastic(job, _elastic(**elastic))
    else:
        with pytest.raises(InputError, match="workers cannot share keep_global's global batch"):
            TrainJob._check_elastic(job, _elastic(**elastic))


def test_the_shipped_configs_pass_the_new_checks():
    """The bounds refuse typos, not the jobs the project runs (every shipped train config loads)."""
    from hpcbench.train.config import load_config

    paths = sorted((ROOT / "jobs" / "configs").glob("train-*.yaml"))
    assert paths
    for path in paths:
        load_config(path)

"""The elastic policy, batch splitting and state packing without MPI; bad elastic configs exit 2."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from pydantic import ValidationError

from hpcbench.policies import PolicyContext
from hpcbench.policies.elastic import ElasticSchedule
from hpcbench.train.adaptation.elastic import pack_state, split_batch, unpack_state
from mpitools import run_mpi

QUICK = ["--model", "digits_mlp", "--warmup", "0", "--iterations", "1", "--batches_per_iter", "2",
         "--progress", "false", "--profile_steps", "1"]


def _ctx(step, world=1):
    return PolicyContext(rank=0, world_size=world, step=step, epoch=0, samples=0, epoch_size=None,
                         batch_sizes=(8,) * world, learning_rate=0.1, sync="ring", algorithm="ring", total_steps=200)


def test_elastic_schedule_decides_each_key_after_the_step_before_it():
    """'0:1, 50:2, 100:4, 150:2': key k after step k-1; key 0 only when the run does not start with it."""
    policy = ElasticSchedule(ElasticSchedule.Config(schedule="0:1, 50:2, 100:4, 150:2"))
    decided = {t: policy.after_step(_ctx(t), None) for t in range(200)}
    assert {t + 1: d.workers for t, d in decided.items() if d is not None} == {50: 2, 100: 4, 150: 2}
    assert decided[49].reason == "step 50 of the schedule"
    assert policy.before_train(_ctx(-1, world=1)) is None
    assert policy.before_train(_ctx(-1, world=3)).workers == 1
    for bad, needle in [("0:0", "schedule.0"), ("-1:2", "schedule.-1"), ("5", "not KEY:VALUE")]:
        with pytest.raises(ValidationError, match=needle):
            ElasticSchedule.Config(schedule=bad)


def test_split_batch_keeps_the_global_or_the_local_batch():
    assert split_batch((4, 4, 4), 2, "keep_global") == (6, 6)
    assert split_batch((6, 6), 4, "keep_global") == (3, 3, 3, 3)
    assert split_batch((5,), 3, "keep_global") == (2, 2, 1)
    assert split_batch((4, 4), 3, "keep_local") == (4, 4, 4)
    with pytest.raises(ValueError, match="global batch of 2 cannot be split over 3 workers"):
        split_batch((1, 1), 3, "keep_global")


def test_pack_state_round_trips_model_buffers_and_optimizer_state():
    """Parameters, batch-norm statistics and momentum buffers arrive bit for bit in a fresh replica."""
    torch.manual_seed(0)

    def build():
        return torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.BatchNorm1d(3))

    model = build()
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    model(torch.randn(8, 4)).sum().backward()
    opt.step()
    layout, data = pack_state(model, opt)
    assert data.dtype == np.uint8 and any(w == "optimizer" for w, *_ in layout)
    other = build()
    other_opt = torch.optim.SGD(other.parameters(), lr=0.1, momentum=0.9)
    unpack_state(layout, data.copy(), other, other_opt)
    for (k, a), b in zip(model.state_dict().items(), other.state_dict().values()):
        assert torch.equal(a, b), k
    for pa, pb in zip(model.parameters(), other.parameters()):
        assert torch.equal(opt.state[pa]["momentum_buffer"], other_opt.state[pb]["momentum_buffer"])


def test_a_worker_count_beyond_the_ranks_started_exits_2_naming_key_and_value(tmp_path):
    out = tmp_path / "bad.h5"
    proc = run_mpi(2, ["-m", "hpcbench.train", *QUICK, "--elastic", "{schedule: '0:1, 3:4'}", "--output", str(out)],
                   timeout=120)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "key 'elastic.schedule.3' has bad value 4: more workers than the 2 ranks started" in proc.stderr
    assert "Traceback" not in proc.stderr and not out.exists()


@pytest.mark.parametrize("overrides,needle", [
    ({"elastic": "{schedule: '0:1, 3:0'}"}, "key 'elastic.schedule.3' has bad value 0"),
    ({"elastic": "{schedule: '0:1, 3'}"}, "key 'elastic.schedule' has bad value '0:1, 3'"),
    ({"elastic": "{batch: keep_all}"}, "key 'elastic.batch' has bad value 'keep_all'"),
    ({"elastic": "{mode: spawn}"}, "key 'elastic.mode' has bad value 'spawn'"),
    ({"elastic": "{workers: 2, schedule: '0:1'}"}, "workers: 2 differs from the schedule's key 0 (1)"),
    ({"policies": "[{name: elastic, schedule: '0:1'}]"}, "policies.0: 'elastic' decides the worker count"),
    ({"policies": "[{name: elastic, schedule: '0:1'}]", "elastic": "{schedule: '0:2'}"},
     "elastic.schedule: policies.0 decides the worker count too"),
    ({"elastic": "{workers: 1}", "monitors": "[gns]"}, "elastic: monitors ['gns']"),
    ({"elastic": "{workers: 1}", "sync": "[ring, ddp]"}, "elastic: sync 'ddp' wraps the model"),
    ({"elastic": "{workers: 1}", "sync": "[ring, sma]", "interleave_sync": "true"}, "interleave_sync: false"),
])
def test_bad_elastic_configs_name_the_key_and_value(overrides, needle):
    from hpcbench.runtime.config import ConfigError
    from hpcbench.train.config import load_config

    with pytest.raises(ConfigError) as err:
        load_config(None, {"model": "digits_mlp", **overrides})
    assert needle in str(err.value)

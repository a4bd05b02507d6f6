"""sync_switch (KungFu's AdaptiveSGDOptimizer, and a threshold rule) on recorded telemetry; its config errors (and
gns_batch's, through the command line: exit 2)."""

from __future__ import annotations

import numpy as np
import pytest
from pydantic import ValidationError

from hpcbench.policies import POLICIES, Decision, PolicyContext, Telemetry
from hpcbench.policies.sync_switch import SyncSwitch

NAN = float("nan")
VAR = "variance_trace_grad_variance"


def _ctx(step: int, rank: int = 0) -> PolicyContext:
    return PolicyContext(rank=rank, world_size=2, step=step, epoch=0, samples=0, epoch_size=None,
                         batch_sizes=(8, 8), learning_rate=0.1, sync="sma", algorithm=None, total_steps=None)


def _tel(step: int, var: float = NAN, losses=(1.0, 1.0), gathered: bool = True) -> Telemetry:
    ranks = np.array([[x] for x in losses]) if gathered else None
    return Telemetry(step, 0, ("loss",), np.array([losses[0]]), ranks, {VAR: var} if var == var else {}, (8, 8))


def _policy(**section) -> SyncSwitch:
    return POLICIES["sync_switch"](SyncSwitch.Config(**section))


def test_fixed_step_is_kungfus_change_step():
    """KungFu: SMA while global_step < change_step, S-SGD from it: one decision before training, due before
    step 50."""
    p = _policy(at_step=50, to={"name": "ring", "algorithm": "tree"})
    assert p.before_train(_ctx(-1)) == Decision(sync={"name": "ring", "algorithm": "tree"}, at_step=50,
                                                reason="sync_switch: step 50 (change_step)")
    assert all(p.after_step(_ctx(t), _tel(t, var=0.0)) is None for t in range(60))
    assert p.agreement == "root" and p.decides == {"sync"}


def test_threshold_with_patience_by_hand():
    """below 1.0 for 2 observed steps: 3 (0), 0.5 (1), unobserved (1), 2 (0), 0.8 (1), 0.9 (2: switch before
    step 6), then never again."""
    p = _policy(signal=VAR, threshold=1.0, patience=2)
    assert p.before_train(_ctx(-1)) is None
    got = [p.after_step(_ctx(t), _tel(t, var=v)) for t, v in enumerate([3.0, 0.5, NAN, 2.0, 0.8, 0.9, 0.1])]
    assert [d is not None for d in got] == [False] * 5 + [True, False]
    assert got[5].sync == "ring" and got[5].at_step is None and "0.9 below 1 for 2" in got[5].reason


def test_telemetry_field_is_the_mean_over_ranks_on_rank_0():
    """loss above 2: the mean of the ranks' losses (1.5 + 3.0) / 2 = 2.25 switches; rank 1 never decides."""
    p = _policy(signal="loss", threshold=2.0, when="above", to="tree")
    assert p.after_step(_ctx(0), _tel(0, losses=(1.0, 2.5))) is None       # mean 1.75
    assert p.after_step(_ctx(1), _tel(1, losses=(1.5, 3.0))).sync == "tree"
    q = _policy(signal="loss", threshold=2.0, when="above")
    assert q.after_step(_ctx(1, rank=1), _tel(1, losses=(1.5, 3.0), gathered=False)) is None


@pytest.mark.parametrize("section, needle", [
    ({}, "at_step"), ({"at_step": 5, "signal": VAR, "threshold": 1.0}, "at_step"),
    ({"signal": VAR}, "threshold"), ({"signal": VAR, "threshold": float("inf")}, "threshold"),
    ({"at_step": -1}, "at_step"), ({"at_step": 3, "when": "equal"}, "when"),
    ({"at_step": 3, "patience": 0}, "patience"),
])
def test_bad_sections(section, needle):
    with pytest.raises(ValidationError, match=needle):
        SyncSwitch.Config(**section)


def test_config_names_key_and_value():
    from hpcbench.runtime.config import ConfigError
    from hpcbench.train.config import load_config

    base = {"model": "digits_mlp", "sync": "[{name: sma, alpha: 0.1}]"}
    with pytest.raises(ConfigError, match=r"policies\.0\.sync_switch\.at_step.*-3"):
        load_config(None, {**base, "policies": "[{name: sync_switch, at_step: -3}]"})
    with pytest.raises(ConfigError, match="'sync_switch' switches to sync 'warp'.*unknown synchroniser 'warp'"):
        load_config(None, {**base, "policies": "[{name: sync_switch, at_step: 3, to: warp}]"})
    with pytest.raises(ConfigError, match="reads 'grad_var', which is no telemetry field"):
        load_config(None, {**base, "policies": "[{name: sync_switch, signal: grad_var, threshold: 1}]"})
    cfg = load_config(None, {**base, "policies": "[{name: sync_switch, signal: loss, threshold: 0.5}]"})
    assert cfg.policies[0].signal == "loss"


@pytest.mark.mpi
@pytest.mark.parametrize("policy, needle", [
    ("{name: sync_switch, at_step: 3, patience: 0}", "key 'policies.0.sync_switch.patience' has bad value 0"),
    ("{name: gns_batch, rule: tripling}", "key 'policies.0.gns_batch.rule' has bad value 'tripling'"),
])
def test_bad_policy_exits_2_naming_key_and_value(tmp_path, policy, needle):
    """One bad section per adaptive policy through the command line: exit status 2, the key and the value, no
    result file."""
    from mpitools import run_mpi

    out = tmp_path / "bad.h5"
    proc = run_mpi(1, ["-m", "hpcbench.train", "--model", "digits_mlp", "--monitors", "[gns]", "--policies",
                       f"[{policy}]", "--output", str(out)], timeout=120)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert needle in proc.stderr and "Traceback" not in proc.stderr and not out.exists()

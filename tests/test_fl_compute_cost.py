"""``traces.compute_cost: flops``: the model's MACs against the device trace's reference model."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from hpcbench.fl.compute_cost import REFERENCE_FORWARD_MACS, compute_cost_ratio, forward_macs_per_sample
from hpcbench.fl.models.charlstm import CharLSTM
from hpcbench.fl.models.mlp import MLP
from hpcbench.fl.config import ConfigError, load_config
from mpitools import run_mpi


def test_mlp_macs_are_its_weight_count():
    assert forward_macs_per_sample(MLP(64, 64, 10), torch.randn(5, 64)) == 64 * 64 + 64 * 10
    assert forward_macs_per_sample(MLP(64, 0, 10), torch.randn(1, 64)) == 64 * 10  # logistic regression


@pytest.mark.parametrize("layers", [1, 2])
def test_lstm_macs_counted_by_formula(layers):
    """The counter misses the LSTM on CPU; the hook adds 4H(I+H) per step and layer, the head is counted."""
    vocab, emb, hidden, steps = 30, 8, 16, 12
    model = CharLSTM(vocab, emb, hidden, layers)
    gates = 4 * hidden * (emb + hidden) + (layers - 1) * 4 * hidden * (2 * hidden)
    expected = steps * (gates + hidden * vocab)
    assert forward_macs_per_sample(model, torch.randint(0, vocab, (3, steps))) == expected


def test_ratio_against_reference_and_errors():
    model, x = MLP(64, 64, 10), torch.randn(2, 64)
    assert compute_cost_ratio(model, x, "ResNet") == pytest.approx(4736 / 4.09e9, rel=1e-12)
    assert compute_cost_ratio(model, x, "ViT") == pytest.approx(4736 / REFERENCE_FORWARD_MACS["ViT"], rel=1e-12)
    with pytest.raises(ValueError, match="MobileNet"):
        compute_cost_ratio(model, x, "MobileNet")
    with pytest.raises(ValueError, match="at least one example"):
        forward_macs_per_sample(model, torch.zeros(0, 64))
    with pytest.raises(ValueError, match="no multiply-accumulate"):
        forward_macs_per_sample(torch.nn.ReLU(), torch.randn(2, 3))


def test_config_values():
    assert load_config(None, {}).traces.compute_cost == "trace"
    with pytest.raises(ConfigError, match="compute_cost") as info:
        load_config(None, {"traces.compute_cost": "fast"})
    assert "fast" in str(info.value)
    with pytest.raises(ConfigError, match="flhetbench-device") as info:
        load_config(None, {"traces.compute_cost": "flops", "traces.device.format": "none"})
    assert "'none'" in str(info.value)


def test_clock_charges_scaled_compute_and_default_is_unchanged():
    """Same draws, compute x the ratio; communication untouched; ``trace`` keeps compute_scale exactly."""
    from hpcbench.fl.job import prepare

    base = {"dataset.num_clients": "20", "participants": "4", "traces.compute_scale": "0.7",
            "client_training": "sequential"}  # the FLOPs count needs the torch model
    plain = prepare(load_config(None, base))
    scaled = prepare(load_config(None, {**base, "traces.compute_cost": "flops"}))
    assert plain.clock.compute_scale == 0.7
    ratio = compute_cost_ratio(plain.model, plain.dataset.test_set()[0][:8], "ResNet")
    assert scaled.clock.compute_scale == pytest.approx(0.7 * ratio, rel=1e-12)
    ids = np.arange(6, dtype=np.int64)
    c0, m0 = plain.clock.client_times(ids, np.random.default_rng(5))
    c1, m1 = scaled.clock.client_times(ids, np.random.default_rng(5))
    np.testing.assert_allclose(c1, c0 * ratio, rtol=1e-12)
    assert m1.tobytes() == m0.tobytes()
    assert c1.max() < 1e-3 < c0.min()  # an MLP costs microseconds where ResNet-50 costs seconds


@pytest.mark.mpi
def test_bad_compute_cost_exits_2_without_output(tmp_path):
    out = tmp_path / "never.h5"
    proc = run_mpi(1, ["-m", "hpcbench.fl", "--traces.compute_cost", "flops", "--traces.device.format",
                       "fedscale-capacity", "--output", str(out)], timeout=120)
    assert proc.returncode == 2, proc.stderr
    assert "compute_cost" in proc.stderr and "fedscale-capacity" in proc.stderr
    assert not out.exists()

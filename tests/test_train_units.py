"""Units of the training runner: the torchvision import, bucketing, the alpha-beta step prediction."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hpcbench.collectives.cost import predict_allreduce
from hpcbench.train.buckets import BucketPlan
from hpcbench.train.predict import predict_step
from hpcbench.train.profile import ComputeProfile


def test_torchvision_models_build_without_weights():
    from hpcbench.train.models import build_model

    counts = {"resnet50": 25_557_032, "mobilenet_v2": 3_504_872}
    for name, n in counts.items():
        assert sum(p.numel() for p in build_model(name, 0).parameters()) == n, name


def test_buckets_fill_in_reverse_order_up_to_the_cap():
    plan = BucketPlan([100, 10, 300, 50, 5], bucket_bytes=4 * 200)
    assert plan.buckets == [[4, 3, 2], [1, 0]]              # closes once it holds >= 200 elements
    assert plan.numel.tolist() == [355, 110] and plan.nbytes.tolist() == [1420, 440]
    assert plan.where[2] == (0, 55) and plan.where[0] == (1, 10)
    assert plan.ready_times([0.9, 0.8, 0.5, 0.2, 0.1]).tolist() == [0.5, 0.9]
    with pytest.raises(ValueError, match="bucket_bytes"):
        BucketPlan([1], 0)


def test_prediction_replays_the_bucket_timeline():
    prof = ComputeProfile(0.1, 0.2, 0.01, np.zeros(0), ())
    a, b = 1e-5, 8e-10                                       # 10 us, 10 Gbit/s
    t = [predict_allreduce("ring", n, 8, a, b) for n in (4e7, 4e7)]
    # the first bucket is ready at 0.05 s of backward, the second at its end: no overlap for the second
    step, eff, comm = predict_step(prof, [4e7, 4e7], [0.05, 0.2], "ring", 8, a, b)
    end = max(0.1 + 0.2, max(0.1 + 0.05 + t[0], 0.1 + 0.2) + t[1])
    assert step == pytest.approx(end + 0.01) and eff == pytest.approx(0.31 / step)
    assert comm == pytest.approx(sum(t))
    assert predict_step(prof, [4e7], [0.2], "ring", 1, a, b)[1] == 1.0       # one worker: no communication
    assert np.isnan(predict_step(prof, [4e7], [0.2], None, 8, a, b)[0])
    # model averaging: the exchange of the whole model runs from the start of the step
    step, eff, _ = predict_step(prof, [4e7, 4e7], [0.05, 0.2], "pair", 8, a, b, averages="models")
    assert step == pytest.approx(max(0.3, a + 8e7 * b) + 0.01)


@settings(max_examples=40, deadline=None)
@given(st.dictionaries(st.sampled_from(["sync", "model", "compute", "time_dilation", "compute_time_s", "monitors",
                                        "interleave_monitors", "link.bandwidth", "link.kind", "bucket_mb",
                                        "algorithm", "compressor", "batch_size", "link.trace_index"]),
                       st.one_of(st.text(max_size=20), st.sampled_from(["[ring, sma]", "[ddp]", "emulated", "4",
                                                                         "-1", "1e400", "[]", "model", "true"])),
                       max_size=5))
def test_any_override_gives_a_config_or_a_config_error(overrides):
    from hpcbench.runtime.config import ConfigError
    from hpcbench.train.config import TrainConfig, load_config

    try:
        assert isinstance(load_config(None, overrides), TrainConfig)
    except ConfigError as exc:
        assert 0 < len(str(exc)) < 5000


def test_horovod_that_cannot_be_imported_is_unavailable_with_its_reason(monkeypatch):
    import sys

    from hpcbench.sync import Unavailable, get

    monkeypatch.setitem(sys.modules, "horovod.torch", None)        # what an absent wheel looks like
    with pytest.raises(Unavailable, match="import horovod.torch failed.*build_horovod"):
        get("horovod")(None)

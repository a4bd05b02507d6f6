"""Units of the training runner: the torchvision import, bucketing, the alpha-beta step prediction."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hpcbench.collectives.cost import predict_allreduce
from hpcbench.sync import get
from hpcbench.train.synchronisation.buckets import BucketPlan
from hpcbench.train.synchronisation.predict import link_cost, predict_step
from hpcbench.train.steps.profile import ComputeProfile


def test_torchvision_models_build_without_weights():
    from hpcbench.train.workloads.models import build_model

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
    step, eff, comm = predict_step(prof, [4e7, 4e7], [0.05, 0.2], link_cost(get("ring"), 8, a, b))
    end = max(0.1 + 0.2, max(0.1 + 0.05 + t[0], 0.1 + 0.2) + t[1])
    assert step == pytest.approx(end + 0.01) and eff == pytest.approx(0.31 / step)
    assert comm == pytest.approx(sum(t))
    assert predict_step(prof, [4e7], [0.2], link_cost(get("ring"), 1, a, b))[1] == 1.0   # one worker: no comm
    assert np.isnan(predict_step(prof, [4e7], [0.2], None)[0])
    assert link_cost(get("ring"), 8, a, float("nan")) is None and link_cost(get("horovod"), 8, a, b) is not None
    assert link_cost(get("compressed"), 8, a, b) is None      # no alpha-beta model: payloads depend on the data
    # model averaging: the exchange of the whole model runs from the start of the step
    step, eff, _ = predict_step(prof, [4e7, 4e7], [0.05, 0.2], link_cost(get("pair"), 8, a, b), averages="models")
    assert step == pytest.approx(max(0.3, a + 8e7 * b) + 0.01)
    # the copy into the send buffer before the exchange and the mixing after it lengthen the step
    passes = ComputeProfile(0.1, 0.2, 0.01, np.zeros(0), (), copy_s=0.004, scale_s=0.002, axpy_s=0.005)
    sma_sync = get("sma")(None)
    step, eff, _ = predict_step(passes, [4e7, 4e7], [0.05, 0.2], link_cost(sma_sync, 8, a, b), averages="models",
                                mix_s=sma_sync.mix_memory_s(passes))
    assert step == pytest.approx(0.004 + max(0.3, predict_allreduce("auto", 8e7, 8, a, b)) + 0.007 + 0.01)
    assert eff == pytest.approx(0.31 / step)
    sma = get("sma")      # its allreduce is an option of the entry
    for alg in ("auto", "tree"):
        cost = link_cost(sma(None, config=sma.Config(algorithm=alg)), 8, a, b)
        assert cost(8e7) == predict_allreduce(alg, 8e7, 8, a, b)


@settings(max_examples=40, deadline=None)
@given(st.dictionaries(st.sampled_from(["sync", "model", "compute", "time_dilation", "compute_time_s", "monitors",
                                        "interleave_monitors", "link.bandwidth", "link.kind", "bucket_mb",
                                        "schedule", "overlap", "batch_size", "link.trace_index"]),
                       st.one_of(st.text(max_size=20), st.sampled_from(["[ring, sma]", "[ddp]", "emulated", "4",
                                                                         "-1", "1e400", "[]", "model", "true",
                                                                         "[{name: sma, alpha: 2}]", "[ring:x]",
                                                                         "[{name: compressed, compressor: topk}]",
                                                                         "[{name: ring, bogus: 1}]", "[{}]"])),
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


def test_priority_order_sends_the_earliest_needed_ready_bucket_first():
    from hpcbench.train.synchronisation.priority import priority_order

    # link frees at 2.5 with buckets 1 and 2 ready: 2 (needed first) goes before 1
    assert priority_order([0, 1, 2], [2.5, 1, 1], [2, 1, 0]).tolist() == [0, 2, 1]
    # a bucket never starts before it is ready: with a free link, readiness decides
    assert priority_order([0, 1, 2], [0.5, 0.5, 0.5], [2, 1, 0]).tolist() == [0, 1, 2]
    # ties in need go to the lower index
    assert priority_order([0, 0, 0], [1, 1, 1], [1, 0, 0]).tolist() == [1, 2, 0]
    with pytest.raises(ValueError, match="lengths"):
        priority_order([0, 1], [1], [0, 1])


def test_priority_prediction_by_hand():
    """Two buckets: bucket 0 (last layers, 3 elements) ready at 0.1 s of backward and needed at 0.08 s of
    forward; bucket 1 (first layers, 1 element) ready at 0.2 (end of backward), needed at 0. Each takes 0.05 s."""
    from hpcbench.train.synchronisation.priority import forward_with_waits, predict_priority_step

    prof = ComputeProfile(0.1, 0.2, 0.04, np.zeros(0), ())
    step, eff, comm = predict_priority_step(prof, [3, 1], [0.1, 0.2], [0.08, 0.0], [0.05, 0.05])
    # link: bucket 0 on 0.1-0.15, bucket 1 on 0.2-0.25. Next forward from 0.2: waits for bucket 1 till 0.25,
    # updates it (0.01), computes 0.08 (bucket 0 long done), updates bucket 0 (0.03), computes the last 0.02
    assert step == pytest.approx(0.25 + 0.01 + 0.08 + 0.03 + 0.02)
    assert eff == pytest.approx(0.34 / step) and comm == pytest.approx(0.1)
    assert forward_with_waits(0.0, [0.0, 0.0], [0.08, 0.0], [0.0, 0.0], 0.1) == pytest.approx(0.1)
    # through predict_step: the FIFO barrier waits for both buckets, then the optimizer; priority waits for
    # the small first-layer bucket only
    a, b = 1e-5, 8e-10
    t = [predict_allreduce("ring", n, 8, a, b) for n in (4e7, 4e6)]
    ring = link_cost(get("ring"), 8, a, b)
    fifo = predict_step(prof, [4e7, 4e6], [0.1, 0.2], ring)[0]
    prio = predict_step(prof, [4e7, 4e6], [0.1, 0.2], ring, schedule="priority",
                        bucket_need_s=[0.08, 0.0])[0]
    assert fifo == pytest.approx(0.2 + t[1] + 0.04 + 0.1)
    assert prio == pytest.approx(0.2 + t[1] + 0.04 / 11 + 0.08 + 0.04 * 10 / 11 + 0.02)


def test_the_digits_stream_sees_every_sample_once_per_epoch_whatever_the_batch_sizes():
    """A batch that changes at run time re-slices the stream: the steps' global batches tile the epochs'
    permutations, each worker takes its slice (per-worker sizes too), a step may span two epochs."""
    from hpcbench.train.workloads.digits import DigitsTask

    from hpcbench.train.workloads.models import MODELS

    arrays = DigitsTask.load(0)
    n = len(arrays[1])
    assert n == MODELS["digits_cnn"].train_samples == MODELS["digits_mlp"].train_samples     # the declared epoch
    workers = [DigitsTask(0, r, 3, arrays) for r in range(3)]
    position, seen = 0, []
    schedule = [(5, 5, 5)] * 40 + [(64, 64, 64)] * 10 + [(1, 30, 7)] * 30 + [(100, 100, 100)] * 10
    for sizes in schedule:
        parts = [w.stream(position + sum(sizes[:r]), sizes[r]) for r, w in enumerate(workers)]
        x, y = workers[1].take(position, sizes)
        assert len(y) == sizes[1] and np.array_equal(y.numpy(), arrays[1][parts[1]])
        seen.append(np.concatenate(parts))
        position += sum(sizes)
    stream = np.concatenate(seen)
    assert len(stream) == position > 2 * n
    for e in range(position // n):
        assert np.array_equal(np.sort(stream[e * n:(e + 1) * n]), np.arange(n)), e      # once per epoch
    assert not np.array_equal(stream[:n], stream[n:2 * n])                              # a new order each epoch


@pytest.mark.parametrize("variants", [["none"], ["none", "gns"], ["none", "gns", "variance"],
                                      ["none", "a", "b", "c"]])
def test_interleaved_monitor_variants_take_turns_in_a_williams_design(variants):
    from hpcbench.runtime.interleave import balanced_orders
    from hpcbench.train.steps.context import StepInfo
    from hpcbench.train.steps.plan import MeasuredPlan

    n = len(variants)
    rounds = len(balanced_orders(n))
    warmup, iterations, per_iter = n + 1, 2 * rounds, 3
    plan = MeasuredPlan(warmup, iterations, per_iter, variants)

    class Ctx:
        info = None

    ctx, infos = Ctx(), []
    while (info := plan.next(ctx)) is not None:
        infos.append(info)
        ctx.info = info
    assert len(infos) == plan.total_steps == warmup + n * iterations * per_iter
    assert all(isinstance(i, StepInfo) for i in infos)
    warm = [i.variant for i in infos if i.iteration < 0]
    assert set(warm) == set(variants)               # every variant's first-use costs fall in the warm-up
    runs = [infos[warmup + k * per_iter].variant for k in range(n * iterations)]
    assert all(infos[warmup + k * per_iter + j].variant == runs[k] for k in range(n * iterations)
               for j in range(per_iter))
    assert Counter(runs) == {v: iterations for v in variants}
    if n >= 2:
        seq = [warm[-1], *runs]
        assert all(a != b for a, b in zip(seq, seq[1:]))     # never measured right after itself
    if n >= 3:      # within rounds each follows each other equally often (seams add to some; two just alternate)
        follows = Counter((runs[k], runs[k + 1]) for k in range(len(runs) - 1) if (k + 1) % n)
        assert len(set(follows.values())) == 1 and len(follows) == n * (n - 1)

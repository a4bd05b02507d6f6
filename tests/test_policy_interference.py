"""interference (KungFu's figure 5 strategy) on recorded telemetry, the per-link cost model, and the slow-link
config (link.slow)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from pydantic import ValidationError

from hpcbench.collectives.linkcost import fastest_allreduce, predict_allreduce_links
from hpcbench.collectives.linkmodel import SlowLink, slowdown_at
from hpcbench.policies import POLICIES, Decision, PolicyContext, Telemetry, Vote
from hpcbench.policies.interference import Interference
from hpcbench.train.reporting.tables import STEP_FIELDS

NAN = float("nan")
ALGS = ("ring", "tree", "star")
MB = 1_000_000          # the step's gradient: one bucket of 250,000 float32


def _ctx(step: int, algorithm: str = "star", p: int = 4) -> PolicyContext:
    return PolicyContext(rank=0, world_size=p, step=step, epoch=0, samples=0, epoch_size=None,
                         batch_sizes=(8,) * p, learning_rate=0.1, sync=algorithm, algorithm=algorithm,
                         total_steps=None, message_elements=(MB // 4,), algorithms=ALGS,
                         allreduce_time=predict_allreduce_links)


def _tel(step: int, span: float, sent=(3 * MB, MB, MB, MB), busy=(3e-3, 1e-3, 1e-3, 1e-3)) -> Telemetry:
    """Every rank's numbers (gathered everywhere): this rank's span, each rank's sent bytes and link time."""
    rows = np.zeros((len(sent), len(STEP_FIELDS)))
    rows[:, STEP_FIELDS.index("comm_span_s")] = span
    rows[:, STEP_FIELDS.index("sent_bytes")] = sent
    rows[:, STEP_FIELDS.index("link_busy_s")] = busy
    return Telemetry(step, 0, STEP_FIELDS, rows[0], rows, {}, (8,) * len(sent))


def _policy(**section) -> Interference:
    return POLICIES["interference"](Interference.Config(**section))


def test_votes_by_hand():
    """1 MB per step; step 0 skipped; step 1 (span 10 ms: 100 MB/s) is the reference; then 12 ms (83.3 MB/s: no),
    12.5 ms (80 MB/s: not below 0.8 x 100), 20 ms (50 MB/s: vote 1)."""
    p = _policy()
    assert p.after_step(_ctx(0), _tel(0, 0.5)) is None and p.after_step(_ctx(1), _tel(1, 0.010)) is None
    assert p.reference == pytest.approx(1e8)
    assert [p.after_step(_ctx(t), _tel(t, s)) for t, s in ((2, 0.012), (3, 0.0125), (4, 0.020))] == \
        [Vote(0.0), Vote(0.0), Vote(1.0)]
    assert p.after_step(_ctx(5), _tel(5, NAN)) is None        # no allreduce measured: no vote
    w = _policy(start=0, window=2)                           # reference: the mean of 100 and 50 MB/s
    w.after_step(_ctx(0), _tel(0, 0.010))
    w.after_step(_ctx(1), _tel(1, 0.020))
    assert w.reference == pytest.approx(75e6)
    assert w.after_step(_ctx(2), _tel(2, 1 / 59)) == Vote(1.0)       # 59 MB/s < 60


def test_tally_switches_once_to_the_fastest_on_the_measured_links():
    """Rank 0 sent 3 MB in 3 ms... 12 ms (its link 4x slower: beta 4e-9 s/B), the others 1 MB in 1 ms (1e-9).
    Predicted per step (alpha 0, m = 1 MB): star 1 + 3 x 4 = 13 ms; ring 2 (p-1)/p m 4e-9 = 6 ms; tree (4
    segments of 250 kB, depth 2) reduce 5 x 0.25 ms = 1.25 ms + broadcast from inner ranks 0 and 1, 5 x 2 x 1 ms
    = 10 ms: 11.25 ms. So ring, and only with more than half the votes (2 of 4 is not)."""
    p = _policy()
    p.after_step(_ctx(1), _tel(1, 0.010))
    slow = _tel(2, 0.030, busy=(12e-3, 1e-3, 1e-3, 1e-3))
    assert p.after_step(_ctx(2), slow) == Vote(1.0)
    np.testing.assert_allclose(p.betas, [4e-9, 1e-9, 1e-9, 1e-9])
    assert p.tally(_ctx(2), 2.0) is None
    d = p.tally(_ctx(2), 3.0)
    assert isinstance(d, Decision) and d.algorithm == "ring" and d.at_step is None
    assert "3 of 4 workers" in d.reason and "ring 6.0 ms, tree 11.2 ms, star 13.0 ms" in d.reason
    assert p.switched and p.after_step(_ctx(3), slow) is None and p.tally(_ctx(3), 4.0) is None
    assert p.decides == {"algorithm"} and p.needs_all_ranks


def test_no_switch_when_the_active_algorithm_is_predicted_fastest():
    """Rank 2's link 4x slower under the ring: star 4 + 3 = 7 ms, tree 5 + 2.5 = 7.5 ms, ring 6 ms: no change,
    and the policy keeps tallying; a rank that sent nothing counts as fast as the fastest."""
    p = _policy()
    p.after_step(_ctx(1, "ring"), _tel(1, 0.010))
    tel = _tel(2, 0.030, sent=(MB, MB, MB, 0), busy=(1e-3, 1e-3, 4e-3, 0.0))
    assert p.after_step(_ctx(2, "ring"), tel) == Vote(1.0)
    np.testing.assert_allclose(p.betas, [1e-9, 1e-9, 4e-9, 1e-9])
    assert p.tally(_ctx(2, "ring"), 4.0) is None and not p.switched
    assert p.tally(_ctx(2, "star"), 4.0).algorithm == "ring"


def test_tally_errors():
    p = _policy(candidates=["ring", "warp"])
    p.after_step(_ctx(1), _tel(1, 0.01))
    p.after_step(_ctx(2), _tel(2, 0.05))
    with pytest.raises(ValueError, match="'warp' is not an algorithm"):
        p.tally(_ctx(2), 4.0)
    q = _policy()       # nothing measured on the links (one worker): no reference, no vote
    assert q.after_step(_ctx(1), _tel(1, 0.01, busy=(NAN,) * 4)) is None and q.seen == []
    ctx = PolicyContext(rank=0, world_size=4, step=2, epoch=0, samples=0, epoch_size=None, batch_sizes=(8,) * 4,
                        learning_rate=0.1, sync="sma", algorithm=None, total_steps=None)
    with pytest.raises(ValueError, match="cannot switch its allreduce algorithm"):
        p.tally(ctx, 4.0)


def test_per_link_costs_match_the_uniform_model_and_the_slow_link():
    from hpcbench.collectives.cost import predict_allreduce

    for a in ("ring", "rabenseifner", "recursive_doubling", "tree", "star", "binary_tree_star", "weighted_shards"):
        assert predict_allreduce_links(a, 3 * MB, 1e-5, [2e-9] * 5) == pytest.approx(
            predict_allreduce(a, 3 * MB, 5, 1e-5, 2e-9))
    best, times = fastest_allreduce(["star", "ring"], [MB], 0.0, [4e-9, 1e-9, 1e-9, 1e-9])
    assert best == "ring" and times == pytest.approx({"star": 13e-3, "ring": 6e-3})
    with pytest.raises(ValueError, match="betas"):
        predict_allreduce_links("ring", MB, 0.0, [1e-9, -1.0])


def test_weighted_shards_chosen_with_the_slow_rank_owning_nothing():
    """The links of the tally test, weighted_shards among the candidates: the slow rank gets no shard and sends
    its 1 MB once at 4e-9 s/B (4 ms, the bound of every allreduce); each healthy rank sends 2/3 MB and then
    its 1/3 MB shard to 3 ranks, 5/3 ms; one chunk, so the last allgather (1 ms) follows: 5 ms < ring 6 ms.
    The decision carries the weights the model priced."""
    from dataclasses import replace

    from hpcbench.collectives.linkcost import allreduce_options

    p = _policy()
    ctx = replace(_ctx(2), algorithms=ALGS + ("weighted_shards",), algorithm_options=allreduce_options)
    p.after_step(_ctx(1), _tel(1, 0.010))
    p.after_step(ctx, _tel(2, 0.030, busy=(12e-3, 1e-3, 1e-3, 1e-3)))
    d = p.tally(ctx, 4.0)
    assert d.algorithm["name"] == "weighted_shards"
    np.testing.assert_allclose(d.algorithm["weights"], [0, 1 / 3, 1 / 3, 1 / 3])
    assert "weighted_shards 5.0 ms, ring 6.0 ms" in d.reason
    Decision(algorithm=d.algorithm).digest()        # a mapping decision is hashable for the ranks' agreement


@pytest.mark.parametrize("betas", [[4, 1, 1, 1], [1.2, 1, 1, 1], [1, 1, 1], [3, 1, 2, 1, 1.5], [2, 1], [1, 5, 5]])
def test_shard_weights_balance_the_busiest_link(betas):
    """Water filling: ranks with a shard all finish together (m beta_r (1 + (p-2) w_r) equal), the others (no
    shard) send m and are not below them, and no other weights do better than equal ones."""
    from hpcbench.collectives.algorithms.weighted_shards import shard_weights

    b = np.asarray(betas, dtype=float)
    w = shard_weights(b)
    assert w.sum() == pytest.approx(1.0) and np.all(w >= 0)
    busy = b * (1 + (b.size - 2) * w)
    if b.size > 2:
        assert np.ptp(busy[w > 0]) == pytest.approx(0.0, abs=1e-12)
        assert np.all(busy[w == 0] >= busy[w > 0].max() - 1e-12)
        assert busy.max() <= (b * (1 + (b.size - 2) / b.size)).max() + 1e-12
    else:
        np.testing.assert_allclose(w, (1 / b) / (1 / b).sum())
    assert shard_weights([4, 1, 1, 1]).tolist() == pytest.approx([0, 1 / 3, 1 / 3, 1 / 3])


def test_slow_link_schedule():
    s = (SlowLink(1, 5, 4.0), SlowLink(1, 9, 1.0), SlowLink(2, 0, 2.0))
    assert [slowdown_at(s, 1, t) for t in (0, 4, 5, 8, 9, 50)] == [1, 1, 4, 4, 1, 1]
    assert slowdown_at(s, 2, 0) == 2.0 and slowdown_at(s, 0, 7) == 1.0
    with pytest.raises(ValueError, match="factor"):
        SlowLink(0, 0, 0.5)


@pytest.mark.parametrize("kind, slow, needle", [
    ("model", "[{rank: 0, from_step: 3, factor: 0.5}]", r"link\.slow\.0\.factor.*0\.5"),
    ("model", "[{rank: -1, from_step: 3, factor: 2}]", r"link\.slow\.0\.rank.*-1"),
    ("model", "[{rank: 0, from_step: 3}]", r"link\.slow\.0\.factor"),
    ("shared", "[{rank: 0, from_step: 3, factor: 2}]", "give kind: model"),
    ("model", "[{rank: 0, from_step: 3, factor: 2}, {rank: 0, from_step: 3, factor: 3}]", "two entries from step 3"),
])
def test_bad_slow_links_name_key_and_value(kind, slow, needle):
    from hpcbench.runtime.config import ConfigError
    from hpcbench.train.config import load_config

    with pytest.raises(ConfigError, match=needle):
        load_config(None, {"model": "digits_mlp", "link.kind": kind, "link.slow": slow})


def test_config_errors():
    from hpcbench.runtime.config import ConfigError
    from hpcbench.train.config import load_config

    with pytest.raises(ConfigError, match=r"policies\.0\.interference\.threshold.*1\.2"):
        load_config(None, {"model": "digits_mlp", "link.kind": "model",
                           "policies": "[{name: interference, threshold: 1.2}]"})
    with pytest.raises(ConfigError, match="'interference' reads each rank's measured link time.*link.kind: model"):
        load_config(None, {"model": "digits_mlp", "policies": "[interference]"})
    with pytest.raises(ValidationError, match="window"):
        Interference.Config(window=0)
    cfg = load_config(None, {"model": "digits_mlp", "link.kind": "model",
                             "link.slow": "[{rank: 1, from_step: 4, factor: 3}]", "policies": "[interference]"})
    assert cfg.link.slow[0].factor == 3.0 and cfg.policies[0].threshold == 0.8
    assert cfg.link.scope == "all"
    with pytest.raises(ConfigError, match=r"link\.scope.*'nearby'"):
        load_config(None, {"model": "digits_mlp", "link.kind": "model", "link.scope": "nearby"})
    with pytest.raises(ConfigError, match="scope: 'between_hosts'.*give kind: model"):
        load_config(None, {"model": "digits_mlp", "link.scope": "between_hosts"})
    assert load_config(None, {"model": "digits_mlp", "link.kind": "model",
                              "link.scope": "between_hosts"}).link.scope == "between_hosts"
    from hpcbench.pipeline.config import load_config as pipeline_config

    with pytest.raises(ConfigError, match="link.scope: 'between_hosts'.*training runner's"):
        pipeline_config(Path(__file__).resolve().parent.parent / "jobs/configs/pipeline-quick.yaml",
                        {"link.kind": "model", "link.scope": "between_hosts"})


@pytest.mark.mpi
def test_slow_link_beyond_the_ranks_exits_2(tmp_path):
    """A slow link on a rank the job does not have: exit status 2 naming the key and the value, no result file."""
    from mpitools import run_mpi

    out = tmp_path / "bad.h5"
    proc = run_mpi(1, ["-m", "hpcbench.train", "--model", "digits_mlp", "--link.kind", "model", "--link.slow",
                       "[{rank: 3, from_step: 2, factor: 4}]", "--output", str(out)], timeout=120)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "key 'link.slow.0.rank' has bad value 3: the job has 1 ranks" in proc.stderr
    assert "Traceback" not in proc.stderr and not out.exists()


def test_two_hosts_priced_by_the_two_level_model():
    """2 hosts x 2 ranks, links modelled between hosts only, rank 1's link 8x slower (64 ns/B against 8 ns/B, each
    rank's bytes to the other host over its busy time). The decision is the two-level model's argmin over every
    registered algorithm (free inside a host, the slowest measured link between hosts): hierarchical, which
    sends 2 (G-1)/G m/L = m/2 across; on one host the per-link model takes weighted_shards (rank 1 owns no
    shard) for the same measured links."""
    from hpcbench.collectives.algorithms import find, names
    from hpcbench.collectives.linkcost import HostLinks, fastest_allreduce_hosts
    from hpcbench.train.adaptation.policyhook import between_hosts_time

    algs = tuple(a for a in names() if find(a).cost is not None)
    alpha, m = 1e-5, MB
    betas = (8e-9, 64e-9, 8e-9, 8e-9)
    tel = _tel(2, 0.5, sent=(MB,) * 4, busy=tuple(b * MB for b in betas))
    one = dict(rank=0, world_size=4, step=2, epoch=0, samples=0, epoch_size=None, batch_sizes=(8,) * 4,
               learning_rate=0.1, sync="ring", algorithm="ring", total_steps=None, message_elements=(m // 4,),
               algorithms=algs, allreduce_time=predict_allreduce_links)
    hosts = PolicyContext(**one, ranks_per_host=(2, 2), allreduce_time_hosts=between_hosts_time)
    want, times = fastest_allreduce_hosts(algs, [m], HostLinks((2, 2), 0.0, 0.0, alpha, 64e-9))
    want_one, times_one = fastest_allreduce(algs, [m], alpha, betas)
    assert (want, want_one) == ("hierarchical", "weighted_shards")
    # docs/adaptive.md's numbers: 2 x 10 us + m/2 x 64 ns/B; the ring 2 (p-1)/p m at 64 ns/B; rank 1 owning nothing
    assert (times["hierarchical"], times["ring"], times_one["weighted_shards"]) == \
        pytest.approx((0.03202, 0.09606, 0.07202))
    decided = {}
    for label, ctx in (("hosts", hosts), ("one", PolicyContext(**one))):
        p = _policy(latency_s=alpha)
        p.after_step(ctx, _tel(1, 0.010))
        assert p.after_step(ctx, tel) == Vote(1.0)
        np.testing.assert_allclose(p.betas, betas)
        d = p.tally(ctx, 4.0)
        decided[label] = d.algorithm if isinstance(d.algorithm, str) else d.algorithm["name"]
        if label == "hosts":
            assert "two-level model, hosts 2+2" in d.reason and f"hierarchical {1e3 * times[want]:.1f} ms" in d.reason
            assert p.predicted(ctx, algs) == pytest.approx(times)
    assert decided == {"hosts": want, "one": want_one}

"""The alpha-beta-gamma cost model on hand-computed cases (no MPI)."""

from __future__ import annotations

import pytest

from hpcbench.collectives import choose_algorithm
from hpcbench.collectives.algorithms import get, names
from hpcbench.collectives.cost import link_beta, predict_allreduce

A, B = 1e-4, 1e-9          # 100 us, 1 GB/s


def test_every_registered_algorithm_has_a_cost_model():
    for name in names():
        assert get(name).cost is not None, name
        assert predict_allreduce(name, 1 << 20, 4, A, B) > 0
        assert predict_allreduce(name, 1 << 20, 1, A, B) == 0.0
        assert predict_allreduce(name, 0, 4, A, B) == 0.0


def test_ring_one_segment_is_patarasuk_yuan():
    # block 500 kB < 512 KiB: one segment, 2 (p-1) (alpha + m/p beta)
    assert predict_allreduce("ring", 1_000_000, 2, A, B) == pytest.approx(2 * (A + 5e5 * B))
    assert predict_allreduce("ring", 1_000_000, 4, A, B, 1e-10) == \
        pytest.approx(6 * (A + 2.5e5 * B) + 3 * 2.5e5 * 1e-10)


def test_ring_segments_hide_latency_behind_the_link():
    m = 4 * 2 * 524288                     # blocks of 1 MiB: two 512 KiB segments
    # the link never idles (S s beta >= alpha + s beta): 2 (p-1)/p m beta + alpha
    assert predict_allreduce("ring", m, 4, A, B) == pytest.approx(1.5 * m * B + A)
    # a long latency makes every step alpha + s beta: 5 (alpha + s beta) + S s beta + alpha
    big = 5e-3
    s = 524288
    assert predict_allreduce("ring", m, 4, big, B) == pytest.approx(5 * (big + s * B) + 2 * s * B + big)


def test_rabenseifner_and_fold():
    m = 8e6
    assert predict_allreduce("rabenseifner", m, 8, 1e-5, B) == pytest.approx(6e-5 + 2 * 7 / 8 * m * B)
    # p = 6: p' = 4 plus the fold (2 alpha + 2 m beta + m gamma)
    g = 1e-10
    want = 4e-5 + 2 * 0.75 * m * B + 0.75 * m * g + 2e-5 + 2 * m * B + m * g
    assert predict_allreduce("rabenseifner", m, 6, 1e-5, B, g) == pytest.approx(want)


def test_recursive_doubling():
    assert round(predict_allreduce("recursive_doubling", 1000, 4, 1e-5, 1e-9), 12) == 2.2e-5
    assert predict_allreduce("recursive_doubling", 1000, 4, 1e-5, 1e-9, 1e-9) == pytest.approx(2.4e-5)
    assert predict_allreduce("recursive_doubling", 1000, 3, 1e-5, 1e-9) == pytest.approx(
        1e-5 + 1e-6 + 2e-5 + 2e-6)


def test_tree_pipelines_segments():
    # p = 2, four 250 kB segments: reduce alpha + m beta, bcast alpha + m beta
    assert predict_allreduce("tree", 1_000_000, 2, A, B) == pytest.approx(2 * A + 2e-3)
    # p = 4, one segment: depth 2; reduce 2 (alpha + s beta), bcast 2 alpha + 2 * 2 s beta
    s = 262144
    assert predict_allreduce("tree", s, 4, A, B) == pytest.approx(4 * A + 6 * s * B)


def test_star_and_binary_tree_star():
    m = 1e6
    assert predict_allreduce("star", m, 4, A, B) == pytest.approx(2 * A + 4 * m * B)
    assert predict_allreduce("binary_tree_star", m, 8, A, B) == pytest.approx(
        predict_allreduce("star", m, 8, A, B))
    # two groups of 4: star in, one tree edge up and down, star out
    assert predict_allreduce("binary_tree_star", 200_000, 8, A, B, local_size=4) == \
        pytest.approx(4 * A + 6 * 200_000 * B)


def test_auto_and_arguments():
    for m, p in ((1000, 4), (1 << 20, 2), (1 << 20, 16)):
        assert predict_allreduce("auto", m, p, A, B) == predict_allreduce(choose_algorithm(m, p), m, p, A, B)
    assert link_beta(10e9) == pytest.approx(8e-10)
    with pytest.raises(ValueError, match="algorithm"):
        predict_allreduce("nope", 1, 2, A, B)
    with pytest.raises(ValueError, match="alpha_s"):
        predict_allreduce("ring", 1, 2, -1.0, B)
    with pytest.raises(ValueError, match="world_size:"):
        predict_allreduce("ring", 1, 0, A, B)
    with pytest.raises(ValueError, match="bits_per_s"):
        link_beta(0)


def test_weighted_shards_busiest_link_then_the_last_chunk():
    """Equal links: every link sends 2 (p-1)/p m and is never idle (the last contributions are in at 3/4 of
    that, the last allgather fits after them), plus two latencies and the owner's p-1 additions to m/p. Rank 0
    4x slower with no shard: its 1 MB at 4 beta (4 ms), then the last chunk's allgather: 1 MB is one chunk
    (m/3 to 3 ranks, 1 ms), three chunks of 4 MiB leave a third of that."""
    from hpcbench.collectives.algorithms.weighted_shards import CHUNK_BYTES, weighted_shards_links_cost

    assert predict_allreduce("weighted_shards", 10**6, 4, A, B) == pytest.approx(2 * A + 1.5e6 * B)
    assert predict_allreduce("weighted_shards", 10**6, 4, A, B, 1e-10) == pytest.approx(
        2 * A + 1.5e6 * B + 0.75e6 * 1e-10)
    slow = [4e-9, 1e-9, 1e-9, 1e-9]
    assert weighted_shards_links_cost(10**6, 0.0, slow, [0, 1, 1, 1]) == pytest.approx(5e-3)
    m = 3 * CHUNK_BYTES
    assert weighted_shards_links_cost(m, 0.0, slow) == pytest.approx(4 * m * 1e-9 + m * 1e-9 / 3)

"""The shared tag space of the collectives: families disjoint and inside ``MPI.TAG_UB``."""

from __future__ import annotations

import pytest

from hpcbench.collectives.tags import COMPRESSED_STRIDE, MIN_TAG_UB, SLOTS, TagSpace

TAG_UBS = [MIN_TAG_UB, 65535, 2 ** 29 - 1, 2 ** 31 - 1]


@pytest.mark.parametrize("tag_ub", TAG_UBS)
def test_ranges_disjoint_and_bounded(tag_ub):
    ts = TagSpace(tag_ub)
    assert ts.dense.start == 1 and ts.dense.stop == ts.slots.start
    assert len(ts.slots) == SLOTS and ts.slots.stop == ts.blocking == ts.compressed.start - 1
    assert ts.compressed.stop == tag_ub + 1            # the last valid tag is used, no more
    assert len(ts.compressed) % COMPRESSED_STRIDE == 0
    assert len(ts.compressed) // COMPRESSED_STRIDE >= 1024
    assert len(ts.dense) >= 3 * (tag_ub + 1) // 4 - 2 - SLOTS
    assert ts.family(0) is None and ts.family(tag_ub + 1) is None
    assert ts.family(ts.dense.stop - 1) == "dense"
    assert ts.family(ts.slots.start) == ts.family(ts.slots.stop - 1) == "slots"
    assert ts.family(ts.blocking) == "blocking"
    assert ts.family(ts.compressed.start) == "compressed"


@pytest.mark.parametrize("tag_ub", TAG_UBS)
def test_named_tags_stay_dense(tag_ub):
    ts = TagSpace(tag_ub)
    for i in range(3000):
        t = ts.named(f"grad{i % 300}")
        assert ts.family(t) == "dense"
    assert ts.family(ts.named(None)) == "dense"
    # the whole dense range hashes inside itself, never onto a slot or the blocking tag
    assert max(ts._dense_start + k for k in (0, ts._dense_len - 1)) == ts.dense.stop - 1


def test_blocks_stay_compressed_through_a_wrap():
    ts = TagSpace(MIN_TAG_UB)
    nblocks = len(ts.compressed) // COMPRESSED_STRIDE
    bases = [ts.block() for _ in range(nblocks + 3)]
    assert len(set(bases[:nblocks])) == nblocks        # no reuse before the wrap
    assert bases[nblocks:] == bases[:3]                 # then the same sequence again
    for b in bases:
        assert b in ts.compressed and b + COMPRESSED_STRIDE - 1 in ts.compressed
    assert max(bases) + COMPRESSED_STRIDE - 1 == MIN_TAG_UB


def test_same_sequence_on_every_rank():
    a, b = TagSpace(2 ** 29 - 1), TagSpace(2 ** 29 - 1)
    names = ["x", "y", None, "x", "y", "x"]
    assert [a.named(n) for n in names] == [b.named(n) for n in names]
    assert a.named("x") != a.named("x")                 # the per-name count enters the hash
    assert [a.block() for _ in range(5)] == [b.block() for _ in range(5)]


def test_rejects_tag_ub_below_the_standard():
    with pytest.raises(ValueError, match="32767"):
        TagSpace(32766)

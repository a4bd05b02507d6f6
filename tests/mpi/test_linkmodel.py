"""Link model: bandwidth replay fed by hpcbench.traces (the bundled gz trace), time dilation."""

from __future__ import annotations

import time

import numpy as np
import pytest

from hpcbench.collectives.linkmodel import BandwidthReplay, LinkTransport
from hpcbench.runtime.dilation import TimeDilation
from hpcbench.traces import load_mobiperf


def test_replay_reads_the_bundled_gz_trace():
    trace = load_mobiperf()                       # the bundled .json.gz
    assert trace.source.endswith(".json.gz")
    for row in (0, len(trace) - 1):
        rep = BandwidthReplay.from_mobiperf(index=row, interval_s=0.5, scale=10.0)
        kbps = trace.kbps[trace.offsets[row]:trace.offsets[row + 1]]
        np.testing.assert_array_equal(rep.bits_per_s, kbps * 1e3 * 10.0)
        assert rep.period_s == 0.5 * kbps.size
        assert rep.rate_at(0.6) == kbps[1] * 1e4
    same = BandwidthReplay.from_mobiperf(trace.source, index=3)
    np.testing.assert_array_equal(same.bits_per_s, BandwidthReplay.from_trace(trace, 3).bits_per_s)
    with pytest.raises(ValueError, match="index"):
        BandwidthReplay.from_trace(trace, len(trace))
    with pytest.raises(ValueError, match="scale"):
        BandwidthReplay.from_trace(trace, 0, scale=0.0)


def _one_message(comm, nbytes, **kw):
    """Ring shift of ``nbytes`` over a LinkTransport.

    Returns (wall seconds, arrival stamp - the sender's link-free time, this rank's
    link-free time - its t0, the transport)."""
    lt = LinkTransport(comm, **kw)
    try:
        n, r = comm.size, comm.rank
        buf = np.full(nbytes, r % 256, dtype=np.uint8)
        got = np.empty(nbytes, dtype=np.uint8)
        comm.Barrier()
        t0 = time.monotonic()
        rq = lt.irecv(got, (r - 1) % n, 7)
        sq = lt.isend(buf, (r + 1) % n, 7)
        rq.wait()
        assert time.monotonic() >= rq.ready_at         # not before the modelled arrival
        sq.wait()
        wall = time.monotonic() - t0
        assert np.all(got == (r - 1) % n % 256)
        sender_free = comm.allgather(sq.ready_at)[(r - 1) % n]
        return wall, rq.ready_at - sender_free, sq.ready_at - t0, lt
    finally:
        lt.free()


def test_dilation_stretches_latency_and_transfer(comm):
    nbytes = 125_000                              # 1 ms at 1 Gbit/s, alpha 2 ms
    wall1, lat1, tx1, lt1 = _one_message(comm, nbytes, alpha=2e-3, beta="1Gbit")
    wall3, lat3, tx3, lt3 = _one_message(comm, nbytes, alpha=2e-3, beta="1Gbit",
                                         dilation=TimeDilation(3.0))
    # arrival = departure + d alpha + d tx; the link is free at departure + d tx
    assert lat1 == pytest.approx(2e-3) and lat3 == pytest.approx(6e-3)
    assert 1e-3 <= tx1 <= 1e-3 + 0.05 and 3e-3 <= tx3 <= 3e-3 + 0.05
    assert lt3.modelled_busy_s == pytest.approx(1e-3) == lt1.modelled_busy_s
    assert "dilation=3" in repr(lt3)


def test_dilated_trace_replays_on_modelled_time(comm):
    rep = BandwidthReplay([8e6, 16e6], interval_s=0.5)   # 1 MB/s then 2 MB/s
    lt = LinkTransport(comm, trace=rep, dilation=TimeDilation(4.0))
    try:
        # wall t0 + 2.4 s is modelled 0.6 s: the second sample, 2 MB/s (undilated, 2.4 s
        # would be 0.4 s into the loop: 0.1 MB at 1 MB/s, then 2 MB/s, 0.3 s in all)
        assert lt.transfer_time(500_000, lt.t0 + 2.4) == pytest.approx(0.25)
        # modelled 0.1 s: 0.4 MB at 1 MB/s, then 0.6 MB at 2 MB/s
        assert lt.transfer_time(1_000_000, lt.t0 + 0.4) == pytest.approx(0.7)
        with pytest.raises(TypeError, match="dilation"):
            LinkTransport(comm, dilation=4.0)
    finally:
        lt.free()


@pytest.mark.parametrize("placement", ["block", "cyclic"])
def test_between_hosts_records_the_layout_and_whether_hosts_hold_consecutive_ranks(comm, monkeypatch, placement):
    """Hosts named per rank (two "hosts" of this machine): blocks of consecutive ranks, as Hydra and srun place
    them, are contiguous; a cyclic placement (rank r on host r % 2) is not, once a host holds two ranks."""
    import hpcbench.runtime.hosts as hosts

    size = comm.size
    host_of = (lambda r: r * 2 // size) if placement == "block" else (lambda r: r % 2)
    monkeypatch.setattr(hosts, "hostname", lambda: f"host{host_of(comm.rank)}")
    lt = LinkTransport(comm, alpha=0.0, beta="1Gbit", scope="between_hosts")
    try:
        names = [host_of(r) for r in range(size)]
        assert lt.ranks_per_host == tuple(names.count(h) for h in dict.fromkeys(names))
        assert lt.hosts_contiguous == (placement == "block" or size <= 2)
        assert lt.unmodelled == frozenset(r for r in range(size) if names[r] == names[comm.rank])
    finally:
        lt.free()
    plain = LinkTransport(comm, alpha=0.0, beta="1Gbit")
    try:
        assert plain.ranks_per_host == () and not plain.hosts_contiguous
    finally:
        plain.free()

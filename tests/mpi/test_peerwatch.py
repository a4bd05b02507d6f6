"""The watch for vanished ranks (``hpcbench.runtime.peerwatch``) at any world size, on one host: set-up, clean
goodbyes, and a set-up that cannot connect. A rank that really vanishes is tested on emulated hosts
(``tests/test_multihost.py``), where the watch ends every rank."""

from __future__ import annotations

import socket
import time

import hpcbench.runtime.peerwatch as pw


def test_interface_addresses_list_loopback_last():
    found = pw.interface_addresses()
    assert "127.0.0.1" in found
    loop = [a.startswith("127.") for a in found]
    assert loop == sorted(loop)                          # every loopback address after every other one
    for address in found:
        socket.inet_aton(address)


def test_every_rank_connects_and_a_clean_end_stops_no_one(comm):
    watch = pw.PeerWatch(comm, prog="test")
    assert watch.active and watch.reason == ""
    if comm.rank == 0:
        assert sorted(watch._peers) == list(range(1, comm.size))
    else:
        assert watch._up is not None
    comm.Barrier()
    if comm.rank == comm.size - 1:
        watch.farewell()                                 # a handled failure's goodbye: still no stop
    comm.Barrier()
    time.sleep(0.2)                                      # the watching threads read the goodbyes
    watch.close()
    comm.Barrier()
    watch.close()                                        # idempotent
    assert watch._thread is None and watch._up is None and watch._peers == {}


def test_a_rank_that_cannot_reach_rank_0_leaves_the_watch_off_on_every_rank(comm, monkeypatch, capsys):
    monkeypatch.setattr(pw, "CONNECT_TIMEOUT_S", 0.3)
    monkeypatch.setattr(pw, "interface_addresses", lambda: ["192.0.2.1"])   # TEST-NET-1: nothing answers
    monkeypatch.setattr(socket, "gethostname", lambda: f"host{comm.rank}")  # no rank shares rank 0's host
    watch = pw.PeerWatch(comm, prog="test")
    try:
        if comm.size == 1:
            assert watch.active
            return
        assert not watch.active
        assert "cannot reach rank 0" in watch.reason and "did not connect" in watch.reason
        if comm.rank == 0:
            assert "no watch for vanished ranks" in capsys.readouterr().err
    finally:
        watch.close()


def test_the_file_names_the_first_failure_rank_0_hears_of(comm):
    """A failure notice, then a rank that vanished (what an abort's kills look like to the watch): the results
    file keeps the first; the ones after it are its consequences (``lifecycle.driver._listen_for_failures``)."""
    from hpcbench.lifecycle import driver

    class Results:
        def __init__(self):
            self.errors = []

        def start_heartbeat(self):
            pass

        def mark_failed(self, error):
            self.errors.append(error)

    results = Results()
    channel = driver._listen_for_failures(comm, results, "test")
    try:
        if comm.size == 1:
            assert channel is None
            return
        if comm.rank == 0:
            channel.on_failure(1, 1, "RuntimeError: the cause")
            channel.on_failure(comm.size - 1, 1, "vanished (...)")
            assert results.errors == ["rank 1: RuntimeError: the cause"]
    finally:
        comm.Barrier()
        if channel is not None:
            driver._CHANNEL = channel
        driver._stop_listening()

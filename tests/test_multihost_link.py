"""Jobs on emulated hosts with a network of their own (:mod:`hpcbench.runtime.emulated_net`): traffic between
hosts crosses each host's interface, and a shaped link slows it as set. Each test fails if the link is bypassed
(ranks of different hosts reaching each other through shared memory or the machine's loopback).

Skipped, with the reason, where network namespaces are not permitted (not root) and, for a delay, where the
kernel has no ``netem`` qdisc.
"""

from __future__ import annotations

import json
import os

import pytest

from hosttools import leftovers, network_or_skip, run_on_hosts
from hpcbench.runtime import emulated_net, launch
from hpcbench.runtime.emulated_net import EmulatedNetwork
from mpitools import ROOT

pytestmark = pytest.mark.mpi

PROBE = str(ROOT / "tests" / "linkprobe.py")


def _rows(proc) -> list[dict]:
    assert proc.returncode == 0, f"rc={proc.returncode}\nstdout:\n{proc.stdout[-3000:]}\nstderr:\n{proc.stderr[-3000:]}"
    lines = [line for line in proc.stdout.splitlines() if line.startswith("LINKPROBE ")]
    assert len(lines) == 1, proc.stdout
    return json.loads(lines[0].split(" ", 1)[1])


def test_allreduce_at_2x2_crosses_each_hosts_interface():
    """A 1 MiB allreduce at 2x2 hosts: every host sends at least a quarter of it on its interface, as counted
    inside its namespace and on the bridge; names resolve to the network's addresses."""
    network_or_skip()
    size = 1 << 20
    with EmulatedNetwork(["node0", "node1"]) as net:
        before = net.counters()
        proc = launch.run_mpi(4, [PROBE, "allreduce", str(size)], timeout=240, cwd=ROOT, hosts=(2, 2), env=net.env())
        after = net.counters()
        rows = _rows(proc)
        assert [r["host"] for r in rows] == ["node0", "node0", "node1", "node1"]
        assert all(r["address"] == net.addresses[r["host"]] for r in rows), rows
        assert all(r["correct"] for r in rows)
        for host in net.hosts:
            sent_inside = max(r["sent"] for r in rows if r["host"] == host)
            assert sent_inside >= size // 4, (host, rows)
            assert after[host]["tx_bytes"] - before[host]["tx_bytes"] >= size // 4, (host, before, after)


def test_rate_limits_a_transfer_between_hosts():
    """2 MiB from node0 to node1 over a 50 Mbit/s link take at least 90 % of 2 MiB at 50 Mbit/s (0.34 s);
    over the machine's loopback or shared memory they take milliseconds. The network is gone afterwards."""
    size, rate = 2 << 20, 50e6
    rows = _rows(run_on_hosts((1, 1), [PROBE, "transfer", str(size)], timeout=240, link="rate=50mbit"))
    assert rows[0]["seconds"] >= 0.9 * size * 8 / rate, rows
    assert not leftovers(os.getpid()), "the job's network was left behind"


def test_delay_sets_the_round_trip():
    """With a one-way delay of 20 ms, each round trip of 8 bytes between two hosts takes at least 40 ms."""
    network_or_skip()
    if not emulated_net.netem_available():
        pytest.skip("this kernel has no netem qdisc (sch_netem): a delay cannot be emulated")
    count, delay = 5, 0.020
    rows = _rows(run_on_hosts((1, 1), [PROBE, "pingpong", str(count)], timeout=240, link=f"delay={delay}s"))
    assert rows[0]["seconds"] / count >= 0.95 * 2 * delay, rows

"""The emulated network's pieces without launching MPI: link settings, rates and durations, the namespaces'
/etc/hosts, the ssh stand-in's choice of namespace, the command's bad input; as root, a network made and removed
(also when its maker dies) and its link shaped."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from hpcbench.runtime import emulated_net, launch
from hpcbench.runtime.emulated_net import EmulatedNetwork, LinkSpec, parse_link
from hpcbench.runtime.emulated_net_command import parse_hosts
from hpcbench.runtime.emulated_ssh import network_prefix
from hpcbench.runtime.units import parse_duration, parse_rate
from hosttools import leftovers, network_or_skip
from mpitools import ROOT


def test_link_settings_parse_and_round_trip():
    spec = parse_link("rate=1gbit, delay=0.1ms")
    assert spec == LinkSpec(rate_bps=1e9, delay_s=1e-4)
    assert parse_link(spec.describe()) == spec
    assert parse_link("") == LinkSpec() and not LinkSpec().shaped
    assert parse_link("mtu=9000").mtu == 9000 and parse_link("delay=1ms").shaped
    assert parse_rate("10 Gbit/s") == 1e10 and parse_duration("250us") == pytest.approx(2.5e-4)
    assert parse_duration("2") == 2.0


@pytest.mark.parametrize("text, needle", [("rate=fast", "rate"), ("delay=-1ms", "delay"), ("speed=1gbit", "speed"),
                                          ("rate=1gbit,rate=2gbit", "twice"), ("mtu=20", "mtu"), ("rate", "rate")])
def test_bad_link_settings_name_the_key(text, needle):
    with pytest.raises(ValueError, match=needle):
        parse_link(text)


def test_namespace_hosts_file_moves_the_names_to_the_network():
    base = "127.0.0.1\tlocalhost vm\n# a comment\n::1 localhost\n127.0.1.1 node0\n"
    text = emulated_net._hosts_file({"vm": "10.214.0.1", "node0": "10.214.0.10"}, base)
    lines = text.splitlines()
    assert "127.0.0.1\tlocalhost" in lines and "::1 localhost" in lines and "# a comment" in lines
    assert not any("127.0.1.1" in line for line in lines)
    assert lines[-2:] == ["10.214.0.1\tvm", "10.214.0.10\tnode0"]


def test_ssh_stand_in_enters_the_hosts_namespace_or_refuses_a_stranger(tmp_path):
    spec = tmp_path / "network.json"
    spec.write_text(json.dumps({"hosts": {"node0": "hpcb1a0"}, "hosts_file": "/x/hosts", "env": {"A": "b"}}))
    env = {emulated_net.ENV_VAR: str(spec)}
    assert network_prefix("node0", env) == (["ip", "netns", "exec", "hpcb1a0"], "/x/hosts", {"A": "b"})
    assert network_prefix("node0", {}) == ([], "", {})
    with pytest.raises(ValueError, match="node9.*not in the emulated network"):
        network_prefix("node9", env)
    with pytest.raises(ValueError, match=emulated_net.ENV_VAR):
        network_prefix("node0", {emulated_net.ENV_VAR: str(tmp_path / "missing.json")})
    # the stand-in itself: ssh's status 255 and the reason, nothing started
    proc = subprocess.run([sys.executable, str(ROOT / "hpcbench/runtime/emulated_ssh.py"), "node9", "true"],
                          env={**os.environ, **env}, capture_output=True, text=True, timeout=30)
    assert proc.returncode == 255 and "node9" in proc.stderr


def test_command_and_launcher_refuse_bad_input():
    assert parse_hosts("2") == ["node0", "node1"] and parse_hosts("a:2,b:1") == ["a", "b"]
    for bad in ("a,a", "a,,b"):
        with pytest.raises(ValueError, match="--hosts"):
            parse_hosts(bad)
    for args, needle in ((["--link", "rate=fast", "--", "true"], "rate"), (["--hosts", "x,x", "--", "true"], "hosts"),
                         (["--link", "rate=1gbit"], "no command")):
        proc = subprocess.run([sys.executable, "-m", "hpcbench.runtime.emulated_net_command", *args],
                              capture_output=True, text=True, timeout=60, cwd=ROOT)
        assert proc.returncode == 2 and needle in proc.stderr, proc.stderr
    with pytest.raises(ValueError, match="hosts"):
        launch.run_mpi(2, ["-c", "pass"], link="rate=1gbit")


# ---- as root: the network itself -------------------------------------------------------------------------------

def test_network_is_made_shaped_and_removed():
    network_or_skip()
    with EmulatedNetwork(["node0", "node1"], "rate=200mbit") as net:
        assert set(net.addresses) == {"node0", "node1"} and len(set(net.addresses.values())) == 2
        assert net.shaper in ("netem", "tbf")
        spec = json.loads(Path(net.env()[emulated_net.ENV_VAR]).read_text())
        assert spec["hosts"] == {h: net.namespace(h) for h in net.hosts}
        hosts = Path(spec["hosts_file"]).read_text()
        assert f"{net.addresses['node1']}\tnode1" in hosts and f"{net.bridge_address}\t" in hosts
        # the host's side is shaped, and so is the bridge's port towards it
        inside = subprocess.run(["ip", "netns", "exec", net.namespace("node0"), "tc", "qdisc", "show", "dev",
                                 emulated_net.INTERFACE], capture_output=True, text=True).stdout
        port = subprocess.run(["tc", "qdisc", "show", "dev", net.port("node0")], capture_output=True, text=True).stdout
        assert net.shaper in inside and net.shaper in port and "200Mbit" in inside + port
        assert leftovers(os.getpid())
        counters = net.counters()
        assert set(counters["node0"]) == {"tx_bytes", "rx_bytes", "tx_packets", "rx_packets"}
    assert not leftovers(os.getpid())
    with pytest.raises(RuntimeError, match="not up"):
        net.env()


def test_a_killed_makers_network_is_removed_by_the_next_one():
    network_or_skip()
    code = ("import sys, time; from hpcbench.runtime.emulated_net import EmulatedNetwork\n"
            "net = EmulatedNetwork(['node0', 'node1']).__enter__(); print('UP', flush=True); time.sleep(60)")
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True, cwd=ROOT)
    try:
        assert proc.stdout.readline().strip() == "UP"
        assert leftovers(proc.pid)
    finally:
        proc.kill()
        proc.wait()
    emulated_net.remove_stale()           # (another process making a network may have done it first)
    assert not leftovers(proc.pid)


def test_command_removes_the_network_when_terminated():
    network_or_skip()
    proc = subprocess.Popen([sys.executable, "-m", "hpcbench.runtime.emulated_net_command", "--link", "rate=1gbit",
                             "--", "sleep", "60"], stderr=subprocess.PIPE, text=True, cwd=ROOT)
    try:
        assert "emulated network" in proc.stderr.readline()
        assert leftovers(proc.pid)
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 130
    finally:
        if proc.poll() is None:
            proc.kill()
    assert not leftovers(proc.pid)


def test_a_delay_needs_netem():
    network_or_skip()
    if emulated_net.netem_available():
        with EmulatedNetwork(["node0"], "delay=1ms") as net:
            assert net.shaper == "netem"
    else:
        with pytest.raises(emulated_net.LinkUnsupported, match="netem"):
            EmulatedNetwork(["node0"], "delay=1ms").__enter__()


def test_a_jobs_network_is_removed_whatever_its_end():
    """``run_mpi(link=...)``: a job that fails, and one ended at its time limit, leave no network behind."""
    network_or_skip()
    proc = launch.run_mpi(2, ["-c", "import sys; sys.exit(3)"], timeout=120, hosts=(1, 1), link="")
    assert proc.returncode != 0 and not leftovers(os.getpid())
    with pytest.raises(launch.LaunchTimeout):
        launch.run_mpi(2, ["-c", "import time; time.sleep(60)"], timeout=8, hosts=(1, 1), link="rate=1gbit")
    assert not leftovers(os.getpid())

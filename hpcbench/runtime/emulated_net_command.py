"""Run a command while emulated hosts have a network of their own (:mod:`hpcbench.runtime.emulated_net`).

    python -m hpcbench.runtime.emulated_net_command --hosts node0,node1 --link rate=1gbit,delay=0.1ms -- \\
        mpiexec -launcher ssh -launcher-exec "$PWD/hpcbench/runtime/emulated_ssh.py" \\
                -hosts node0:2,node1:2 -n 4 python -m hpcbench.collectives.bench -a mpi,hierarchical

makes a network namespace per host, joined by a bridge and shaped as
``--link`` says, runs the command with ``HPCBENCH_EMULATED_NET`` set (so the
ssh stand-in starts each host's proxy in its namespace), and removes it all
when the command ends, fails, or this program is interrupted (Ctrl-C,
SIGTERM, SIGHUP). ``--hosts 2`` means ``node0,node1``. Prints the hosts'
addresses, the shaper (``netem``, or ``tbf`` for a rate alone where the
kernel has no ``netem``) and, after the command, each host's bytes sent and
received on the link, to stderr. Exits with the command's status; 2 for bad
input (the message names the option); 1 where the network cannot be made.

``--cleanup`` only removes what networks of processes no longer running left
behind (a process killed with SIGKILL cannot clean up).
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys

from hpcbench.runtime.emulated_hosts import host_names
from hpcbench.runtime.emulated_net import EmulatedNetwork, LinkUnsupported, parse_link, remove_stale

__all__ = ["main", "parse_hosts"]


def parse_hosts(text: str) -> list[str]:
    """Host names from ``"node0,node1"``, ``"node0:2,node1:2"`` (counts ignored) or a count ``"2"``.

    Raises
    ------
    ValueError
        An empty name, a name given twice, or a count below 1 (the message names ``--hosts``).
    """
    text = text.strip()
    if text.isdigit():
        return host_names(int(text))
    names = [item.split(":", 1)[0].strip() for item in text.split(",")]
    if not all(names) or len(set(names)) != len(names):
        raise ValueError(f"--hosts: distinct, non-empty host names needed, got {text!r}")
    return names


class _Stop(Exception):
    """A signal asked this program to end (the network is removed on the way out)."""


def _stop(signum, frame):
    raise _Stop(signum)


def main(argv: list[str] | None = None) -> int:
    """Parse, make the network, run the command, remove the network; returns the exit status."""
    p = argparse.ArgumentParser(prog="python -m hpcbench.runtime.emulated_net_command",
                                description=__doc__.split("\n\n")[1])
    p.add_argument("--hosts", default="2", help="host names (node0,node1) or their count (default 2)")
    p.add_argument("--link", default="", help="rate=RATE,delay=DURATION,mtu=BYTES (e.g. rate=1gbit,delay=0.1ms); "
                                               "default: not shaped")
    p.add_argument("--cleanup", action="store_true", help="remove networks left by dead processes, and exit")
    p.add_argument("command", nargs=argparse.REMAINDER, help="-- COMMAND ARGS...")
    args = p.parse_args(argv)
    if args.cleanup:
        for name in remove_stale():
            print(f"removed {name}", file=sys.stderr)
        return 0
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    try:
        hosts, link = parse_hosts(args.hosts), parse_link(args.link)
        if not command:
            raise ValueError("no command given (after --)")
    except ValueError as exc:
        print(f"emulated_net_command: {exc}", file=sys.stderr)
        return 2
    old = {s: signal.signal(s, _stop) for s in (signal.SIGTERM, signal.SIGHUP)}
    try:
        with EmulatedNetwork(hosts, link) as net:
            print(f"emulated network: {', '.join(f'{h} {a}' for h, a in net.addresses.items())}; launching host "
                  f"{net.bridge_address}; link {link.describe()} ({net.shaper})", file=sys.stderr, flush=True)
            return _run(command, net)
    except (_Stop, KeyboardInterrupt):
        return 130
    except RuntimeError as exc:  # not root, an ip/tc command refused, LinkUnsupported
        print(f"emulated_net_command: {exc}", file=sys.stderr)
        return 1
    finally:
        for s, handler in old.items():
            signal.signal(s, handler)


def _run(command: list[str], net: EmulatedNetwork) -> int:
    """The command to its end with the network's variable set; ended (SIGTERM, then SIGKILL) if interrupted."""
    proc = subprocess.Popen(command, env={**os.environ, **net.env()})
    try:
        rc = proc.wait()
    except BaseException:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        raise
    for host, c in net.counters().items():
        print(f"{host}: sent {c['tx_bytes']} B, received {c['rx_bytes']} B on the link", file=sys.stderr)
    return rc


if __name__ == "__main__":
    sys.exit(main())

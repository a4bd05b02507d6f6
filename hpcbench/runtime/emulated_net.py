"""A network of their own for emulated hosts: one network namespace per host, a bridge, a shaped link.

:mod:`hpcbench.runtime.emulated_hosts` gives each emulated host its own host
name; its ranks still talk over the machine's loopback, far faster than any
link between nodes. An :class:`EmulatedNetwork` puts each host in a network
namespace of its own, joined to the others by a bridge, so that traffic
between hosts crosses an interface, and shapes that interface with ``tc``
(``netem``: delay and rate; ``tbf`` for a rate alone where the kernel has no
``netem``): a measured, not modelled, slow link. Everything stays on this
machine::

    root namespace:  bridge hb<pid><c>br  10.214.K.1/24  (the launching host's name resolves here)
                       |-- hb<pid><c>0 <-veth-> hpcb0 10.214.K.10/24  netns hpcb<pid><c>0 (node0)
                       |-- hb<pid><c>1 <-veth-> hpcb0 10.214.K.11/24  netns hpcb<pid><c>1 (node1)

Shaping, per host: what the host sends leaves ``hpcb0`` at ``rate`` after
``delay`` (its network card and the wire), and what the bridge sends to it
leaves the bridge's port at ``rate`` (a switch port, so that two senders to
one host share its rate). Between two hosts a message therefore takes
``delay`` one way (``2 * delay`` a round trip) plus its bytes at ``rate``.

The ssh stand-in (:mod:`hpcbench.runtime.emulated_ssh`) reads the network's
description from the file named by ``HPCBENCH_EMULATED_NET`` (set by
:meth:`EmulatedNetwork.env`): it starts each host's Hydra proxy in that host's
network namespace (``ip netns exec``) with an ``/etc/hosts`` naming every
host's address and the launching host at the bridge's address (Hydra's proxy
connects back to ``mpiexec`` by that name), and with the variables that keep
MPICH's network modules on ``hpcb0`` (:data:`NETWORK_ENV`).

Everything is created by :meth:`EmulatedNetwork.__enter__` and removed by
:meth:`~EmulatedNetwork.__exit__` (also on an exception or Ctrl-C). A process
killed before that leaves its namespaces and bridge behind under names that
carry its process id; the next network created on the machine removes those
of processes no longer running (:func:`remove_stale`), and
``python -m hpcbench.runtime.emulated_net --cleanup`` does it at once.
Needs root, ``ip`` and ``tc`` (iproute2). See docs/running.md, "Running on
several nodes".
"""

from __future__ import annotations

import fcntl
import ipaddress
import json
import os
import re
import shutil
import socket
import subprocess
import tempfile
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Sequence

from hpcbench.runtime.units import parse_duration, parse_rate

__all__ = ["LinkSpec", "parse_link", "EmulatedNetwork", "LinkUnsupported", "unavailable_reason",
           "netem_available", "remove_stale", "ENV_VAR", "INTERFACE", "NETWORK_ENV"]

#: the variable naming the network's description file, read by the ssh stand-in
ENV_VAR = "HPCBENCH_EMULATED_NET"
#: every host's interface, inside its namespace
INTERFACE = "hpcb0"
#: the subnets used, one /24 per network: 10.214.K.0/24
_SUBNETS = ipaddress.ip_network("10.214.0.0/16")
_LOCK = Path(tempfile.gettempdir()) / "hpcbench-emulated-net.lock"
_NETNS_RE = re.compile(r"^hpcb(\d+)[a-z]\d+$")
_LINK_RE = re.compile(r"^hb(\d+)[a-z](?:br|\d+)$")
_DIR_PREFIX = "hpcbench-net-"
_live_tags: set[str] = set()

#: what keeps MPICH's network modules on the link (set in each host unless the job's environment sets it):
#: UCX by TCP on ``hpcb0`` only (UCX's default transports include shared memory, which reaches the other
#: namespaces' ranks on this machine without crossing any interface: measured, a 4 MiB allreduce at 2x2 hosts
#: sent 0 bytes over the link); libfabric's tcp provider (``MPIR_CVAR_CH4_NETMOD=ofi``) on ``hpcb0``
NETWORK_ENV = {"UCX_TLS": "tcp", "UCX_NET_DEVICES": INTERFACE, "FI_PROVIDER": "tcp", "FI_TCP_IFACE": INTERFACE}


class LinkUnsupported(RuntimeError):
    """The link asked for cannot be shaped here (e.g. a delay where the kernel has no ``netem`` qdisc)."""


@dataclass(frozen=True)
class LinkSpec:
    """The link between emulated hosts.

    Attributes
    ----------
    rate_bps : float or None
        Each host's sending rate, and its switch port's, in bit/s (decimal:
        ``1gbit`` = 1e9); None: not limited.
    delay_s : float
        One-way delay between two hosts, seconds (>= 0); needs ``netem``.
    mtu : int
        The interfaces' MTU, bytes (68..65535; 1500 as on Ethernet).
    """

    rate_bps: float | None = None
    delay_s: float = 0.0
    mtu: int = 1500

    def __post_init__(self) -> None:
        if self.rate_bps is not None and not self.rate_bps > 0:
            raise ValueError(f"link: rate must be positive, got {self.rate_bps}")
        if not self.delay_s >= 0:
            raise ValueError(f"link: delay must be >= 0, got {self.delay_s}")
        if not 68 <= int(self.mtu) <= 65535:
            raise ValueError(f"link: mtu must be 68..65535, got {self.mtu}")

    @property
    def shaped(self) -> bool:
        """Whether ``tc`` shapes the link at all."""
        return self.rate_bps is not None or self.delay_s > 0

    def describe(self) -> str:
        """The spec as :func:`parse_link` reads it (``rate=1e+09bit,delay=0.0001s,mtu=1500``)."""
        parts = [] if self.rate_bps is None else [f"rate={self.rate_bps:g}bit"]
        return ",".join(parts + [f"delay={self.delay_s:g}s", f"mtu={int(self.mtu)}"])


def parse_link(text: str | LinkSpec | None) -> LinkSpec:
    """A :class:`LinkSpec` from ``"rate=1gbit,delay=0.1ms"`` (keys ``rate``, ``delay``, ``mtu``; any subset).

    ``""`` or None is an unshaped link (namespaces and a bridge, no ``tc``).

    Raises
    ------
    ValueError
        An unknown key, a key given twice, or a bad value; the message names it.
    """
    if isinstance(text, LinkSpec):
        return text
    fields: dict[str, object] = {}
    for item in filter(None, (s.strip() for s in (text or "").split(","))):
        key, sep, value = item.partition("=")
        key = key.strip()
        if not sep or key not in ("rate", "delay", "mtu"):
            raise ValueError(f"link: bad item {item!r}: expected rate=RATE, delay=DURATION or mtu=BYTES "
                             f"(e.g. 'rate=1gbit,delay=0.1ms')")
        name = {"rate": "rate_bps", "delay": "delay_s", "mtu": "mtu"}[key]
        if name in fields:
            raise ValueError(f"link: {key} given twice in {text!r}")
        try:
            fields[name] = {"rate": parse_rate, "delay": parse_duration, "mtu": int}[key](value.strip())
        except ValueError as exc:
            raise ValueError(f"link: {key}: {exc}") from None
    return LinkSpec(**fields)


def _run(*cmd: str, check: bool = True) -> subprocess.CompletedProcess:
    proc = subprocess.run(list(cmd), capture_output=True, text=True, timeout=60)
    if check and proc.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)}: {proc.stderr.strip() or f'exit status {proc.returncode}'}")
    return proc


def _alive(pid: int) -> bool:
    return Path(f"/proc/{pid}").exists()


def remove_stale() -> list[str]:
    """Remove the namespaces, interfaces and files of networks whose process is no longer running.

    Returns
    -------
    list of str
        What was removed (namespace and interface names, folders).
    """
    removed = []
    for line in _run("ip", "netns", "list", check=False).stdout.splitlines():
        name = line.split()[0] if line.split() else ""
        m = _NETNS_RE.match(name)
        if m and not _alive(int(m.group(1))):
            _run("ip", "netns", "delete", name, check=False)
            removed.append(name)
    for line in _run("ip", "-o", "link", "show", check=False).stdout.splitlines():
        parts = line.split(":")
        name = parts[1].strip().split("@")[0] if len(parts) > 1 else ""
        m = _LINK_RE.match(name)
        if m and not _alive(int(m.group(1))):
            _run("ip", "link", "delete", name, check=False)
            removed.append(name)
    for folder in Path(tempfile.gettempdir()).glob(f"{_DIR_PREFIX}*"):
        m = re.match(re.escape(_DIR_PREFIX) + r"(\d+)-", folder.name)
        if m and not _alive(int(m.group(1))):
            shutil.rmtree(folder, ignore_errors=True)
            removed.append(str(folder))
    return removed


@lru_cache(maxsize=1)
def unavailable_reason() -> str:
    """Why an emulated network cannot be built here, or ``""`` when it can.

    Needs root, ``ip`` and ``tc``, and a kernel (and container) that lets
    it create a network namespace. Cached for the process.
    """
    if os.geteuid() != 0:
        return "network namespaces need root"
    for tool in ("ip", "tc", "unshare"):
        if shutil.which(tool) is None:
            return f"no '{tool}' command (iproute2, util-linux)"
    name = f"hpcb{os.getpid()}z0"
    proc = _run("ip", "netns", "add", name, check=False)
    if proc.returncode != 0:
        return f"cannot create a network namespace ({proc.stderr.strip()})"
    try:
        proc = _run("ip", "link", "add", f"hb{os.getpid()}z0", "type", "veth", "peer", "name", INTERFACE,
                    "netns", name, check=False)
        if proc.returncode != 0:
            return f"cannot create a veth pair ({proc.stderr.strip()})"
    finally:
        _run("ip", "netns", "delete", name, check=False)
    return ""


@lru_cache(maxsize=1)
def netem_available() -> bool:
    """Whether the kernel has the ``netem`` qdisc (needed for a delay); tried on a veth pair of its own."""
    if unavailable_reason():
        return False
    a, b = f"hb{os.getpid()}y0", f"hb{os.getpid()}y1"
    if _run("ip", "link", "add", a, "type", "veth", "peer", "name", b, check=False).returncode != 0:
        return False
    try:
        return _run("tc", "qdisc", "add", "dev", a, "root", "netem", "delay", "1ms", check=False).returncode == 0
    finally:
        _run("ip", "link", "delete", a, check=False)


def _hosts_file(names: dict[str, str], base: str) -> str:
    """``/etc/hosts`` for the namespaces: ``base`` (this machine's) without ``names``' names, then ``names``."""
    lines = []
    for line in base.splitlines():
        words = line.split("#", 1)[0].split()
        if len(words) >= 2 and any(w in names for w in words[1:]):
            kept = [w for w in words[1:] if w not in names]
            if kept:
                lines.append("\t".join([words[0], *kept]))
            continue
        lines.append(line)
    lines += [f"{address}\t{name}" for name, address in names.items()]
    return "\n".join(lines) + "\n"


class EmulatedNetwork:
    """Network namespaces for emulated hosts, joined by a bridge, with a shaped link; a context manager.

    Parameters
    ----------
    hosts : sequence of str
        The host names (``node0``, ``node1``, ...), as Hydra's ``-hosts`` gives them.
    link : LinkSpec or str, optional
        The link (:func:`parse_link`); default: not shaped.

    Attributes
    ----------
    addresses : dict of str to str
        Each host's IPv4 address (``hpcb0`` in its namespace); ``bridge_address`` is the launching host's.
    shaper : str
        The qdisc shaping the link: ``netem``, ``tbf`` (a rate alone, no ``netem`` in the kernel) or ``none``.

    Raises
    ------
    ValueError
        No host, or a name given twice.
    LinkUnsupported
        On entering: a delay asked for where the kernel has no ``netem``.
    RuntimeError
        On entering: not root, or an ``ip``/``tc`` command failed (everything made so far is removed).

    Examples
    --------
    >>> with EmulatedNetwork(["node0", "node1"], "rate=1gbit") as net:         # doctest: +SKIP
    ...     launch.run_mpi(4, args, hosts=(2, 2), env=net.env())
    """

    def __init__(self, hosts: Sequence[str], link: LinkSpec | str | None = None) -> None:
        self.hosts = [str(h) for h in hosts]
        if not self.hosts or len(set(self.hosts)) != len(self.hosts):
            raise ValueError(f"hosts: distinct host names needed, got {self.hosts}")
        self.link = parse_link(link)
        self.addresses: dict[str, str] = {}
        self.bridge_address = ""
        self.shaper = "none"
        self._tag = ""
        self._dir: Path | None = None
        self._created: list[tuple[str, str]] = []

    # names -------------------------------------------------------------------------------------------------
    def namespace(self, host: str) -> str:
        """The network namespace of ``host`` (``ip netns exec NAME ...``)."""
        return f"hpcb{self._tag}{self.hosts.index(host)}"

    def port(self, host: str) -> str:
        """The bridge's interface towards ``host``, in the root namespace."""
        return f"hb{self._tag}{self.hosts.index(host)}"

    @property
    def bridge(self) -> str:
        """The bridge's name."""
        return f"hb{self._tag}br"

    # life --------------------------------------------------------------------------------------------------
    def __enter__(self) -> "EmulatedNetwork":
        why = unavailable_reason()
        if why:
            raise RuntimeError(f"emulated network unavailable: {why}")
        if self.link.delay_s > 0 and not netem_available():
            raise LinkUnsupported("link: a delay needs the kernel's netem qdisc (sch_netem), which this kernel "
                                  "does not have; a rate alone is shaped with tbf")
        remove_stale()
        pid = os.getpid()
        letter = next(c for c in "abcdefghijklmnopqrstuvwx" if f"{pid}{c}" not in _live_tags)
        self._tag = f"{pid}{letter}"
        _live_tags.add(self._tag)
        try:
            self._create()
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _create(self) -> None:
        with open(_LOCK, "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            subnet = self._free_subnet()
            hosts_ip = list(subnet.hosts())
            self.bridge_address = str(hosts_ip[0])
            _run("ip", "link", "add", self.bridge, "type", "bridge")
            self._created.append(("link", self.bridge))
            _run("ip", "addr", "add", f"{self.bridge_address}/{subnet.prefixlen}", "dev", self.bridge)
        _run("ip", "link", "set", self.bridge, "up")
        mtu = str(int(self.link.mtu))
        for i, host in enumerate(self.hosts):
            ns, port = self.namespace(host), self.port(host)
            self.addresses[host] = str(hosts_ip[9 + i])
            _run("ip", "netns", "add", ns)
            self._created.append(("netns", ns))
            _run("ip", "link", "add", port, "mtu", mtu, "type", "veth", "peer", "name", INTERFACE, "mtu", mtu,
                 "netns", ns)
            self._created.append(("link", port))  # deleted first: a namespace's own devices go asynchronously
            _run("ip", "link", "set", port, "master", self.bridge, "up")
            _run("ip", "-n", ns, "addr", "add", f"{self.addresses[host]}/{subnet.prefixlen}", "dev", INTERFACE)
            _run("ip", "-n", ns, "link", "set", INTERFACE, "up")
            _run("ip", "-n", ns, "link", "set", "lo", "up")
            self._shape(ns, port)
        self._dir = Path(tempfile.mkdtemp(prefix=f"{_DIR_PREFIX}{os.getpid()}-"))
        names = {socket.gethostname(): self.bridge_address, **self.addresses}
        try:
            base = Path("/etc/hosts").read_text(encoding="utf-8", errors="replace")
        except OSError:
            base = ""
        (self._dir / "hosts").write_text(_hosts_file(names, base), encoding="utf-8")
        spec = {"hosts": {h: self.namespace(h) for h in self.hosts}, "hosts_file": str(self._dir / "hosts"),
                "env": dict(NETWORK_ENV),
                "link": self.link.describe(), "shaper": self.shaper}
        (self._dir / "network.json").write_text(json.dumps(spec, indent=1), encoding="utf-8")

    def _free_subnet(self) -> ipaddress.IPv4Network:
        used = set()
        for line in _run("ip", "-o", "-4", "addr", "show").stdout.splitlines():
            m = re.search(r"inet (\S+)", line)
            if m:
                used.add(ipaddress.ip_interface(m.group(1)).network)
        for subnet in _SUBNETS.subnets(new_prefix=24):
            if not any(subnet.overlaps(u) for u in used):
                return subnet
        raise RuntimeError(f"no free /24 left in {_SUBNETS} for an emulated network")

    def _shape(self, ns: str, port: str) -> None:
        """``tc`` on the host's interface (rate and delay) and on the bridge's port to it (rate)."""
        rate, delay = self.link.rate_bps, self.link.delay_s
        if not self.link.shaped:
            return
        if netem_available():
            self.shaper = "netem"
            # room for 100000 packets (netem's default is 1000): the queue delays, it does not drop
            limit = ["limit", "100000"]
            rate_args = [] if rate is None else ["rate", f"{rate:.0f}bit"]
            _run("ip", "netns", "exec", ns, "tc", "qdisc", "replace", "dev", INTERFACE, "root", "netem",
                 "delay", f"{delay * 1e6:.3f}us", *rate_args, *limit)
            if rate is not None:
                _run("tc", "qdisc", "replace", "dev", port, "root", "netem", *rate_args, *limit)
            return
        self.shaper = "tbf"
        # a burst of at least 2 ms at the rate and at least two 64 KiB segments (veth passes GSO packets whole)
        burst = str(int(max(2 * 65536 + 2 * int(self.link.mtu), rate / 8 * 2e-3)))
        tbf = ["tbf", "rate", f"{rate:.0f}bit", "burst", burst, "latency", "100ms"]
        _run("ip", "netns", "exec", ns, "tc", "qdisc", "replace", "dev", INTERFACE, "root", *tbf)
        _run("tc", "qdisc", "replace", "dev", port, "root", *tbf)

    def close(self) -> None:
        """Remove the veth pairs, the namespaces, the bridge and the files; idempotent."""
        for kind, name in reversed(self._created):
            if kind == "netns":
                _run("ip", "netns", "delete", name, check=False)
            else:
                _run("ip", "link", "delete", name, check=False)
        self._created.clear()
        if self._dir is not None:
            shutil.rmtree(self._dir, ignore_errors=True)
            self._dir = None
        _live_tags.discard(self._tag)

    # use ---------------------------------------------------------------------------------------------------
    def env(self) -> dict[str, str]:
        """The variable that points the ssh stand-in at this network (add it to ``mpiexec``'s environment)."""
        if self._dir is None:
            raise RuntimeError("the emulated network is not up (use it as a context manager)")
        return {ENV_VAR: str(self._dir / "network.json")}

    def counters(self) -> dict[str, dict[str, int]]:
        """Bytes and packets each host has sent and received on ``hpcb0`` so far.

        Read from the bridge's ports in the root namespace (what a port
        receives, its host sent). Keys: ``tx_bytes``, ``rx_bytes``,
        ``tx_packets``, ``rx_packets``.
        """
        out = {}
        for host in self.hosts:
            stats = Path("/sys/class/net") / self.port(host) / "statistics"
            read = {k: int((stats / k).read_text()) for k in ("tx_bytes", "rx_bytes", "tx_packets", "rx_packets")}
            out[host] = {"tx_bytes": read["rx_bytes"], "rx_bytes": read["tx_bytes"],
                         "tx_packets": read["rx_packets"], "rx_packets": read["tx_packets"]}
        return out

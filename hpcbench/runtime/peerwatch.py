"""Every rank ends within seconds when a rank of a job on several hosts vanishes.

A rank that *vanishes* (SIGKILL, the out-of-memory killer, a segmentation
fault) runs no handler, so the failure channel
(:mod:`hpcbench.runtime.failure`) never hears of it. On one host MPICH's
``mpiexec`` then kills the other ranks itself. On several hosts MPICH 5.0.2's
Hydra does not: it fails to signal the other hosts' proxies ("unable to write
data to proxy", also with ``-launcher fork``), and the survivors wait in
their next collective for ever. ``srun --kill-on-bad-exit=1`` ends such a
step; a plain ``srun`` does not either.

:class:`PeerWatch` closes that gap without MPI. At start-up every rank other
than 0 opens a TCP connection to rank 0 (outside MPI, so a rank blocked in a
collective does not matter) and sends its rank. The kernel closes a
process's sockets when it dies however it dies, so rank 0 sees the end of a
connection at once. A connection that ends without a goodbye is a vanished
rank. Rank 0 then marks its results file ``failed`` (the ``on_vanished``
callback, the same one the failure channel runs), tells every other rank to
stop, and leaves with status 1. Every other rank leaves with status 1 on that
stop notice, or when rank 0's own connection ends without a goodbye (rank 0
vanished). A host that loses power closes nothing; TCP keep-alive probes
(:data:`KEEPALIVE_S`) find it in about 11 seconds.

Goodbyes: :meth:`PeerWatch.close` (a clean end, before ``MPI_Finalize``) and
:meth:`PeerWatch.farewell` (a failure the lifecycle handles: its own notice
and ``MPI_Abort`` follow, so the watch stays out of the way).

The lifecycle (:mod:`hpcbench.lifecycle.driver`) starts one for every job whose
ranks span more than one host name; the cost while nothing fails is one idle
thread per rank and one socket per rank other than 0. Where the connections
cannot be made (a firewall between nodes), the job runs without the watch and
rank 0 says why on stderr.

The messages are single bytes: ``B`` (goodbye), ``F`` (failing, handled),
``S`` + 4 bytes, big-endian, of the vanished rank (rank 0's stop notice).
The first message of a connection is the connecting rank, 4 bytes, big-endian.
"""

from __future__ import annotations

import fcntl
import selectors
import socket
import struct
import sys
import threading
import time
from typing import Callable

from hpcbench.runtime.failure import _leave

__all__ = ["PeerWatch", "CONNECT_TIMEOUT_S", "KEEPALIVE_S", "interface_addresses"]

#: seconds a rank tries one of rank 0's addresses, and rank 0 waits for all ranks to connect (times ten)
CONNECT_TIMEOUT_S = 3.0
#: TCP keep-alive: idle seconds before the first probe, seconds between probes, probes before the end
KEEPALIVE_S = (5, 2, 3)
_RANK = struct.Struct("!I")
_GOODBYE, _FAILING, _STOP = b"B", b"F", b"S"
_SIOCGIFADDR = 0x8915


def interface_addresses() -> list[str]:
    """This host's IPv4 interface addresses, loopback last (``["10.0.0.5", "127.0.0.1"]``).

    Read with ``SIOCGIFADDR`` for every interface of ``socket.if_nameindex``
    (Linux), plus what the host name resolves to; interfaces without an IPv4
    address are skipped.
    """
    found: list[str] = []
    probe = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        for _, name in socket.if_nameindex():
            try:
                raw = fcntl.ioctl(probe.fileno(), _SIOCGIFADDR, struct.pack("256s", name.encode()[:15]))
            except OSError:
                continue
            found.append(socket.inet_ntoa(raw[20:24]))
    except OSError:
        pass
    finally:
        probe.close()
    try:
        found += [info[4][0] for info in socket.getaddrinfo(socket.gethostname(), None, socket.AF_INET)]
    except OSError:
        pass
    unique = list(dict.fromkeys(found))
    return [a for a in unique if not a.startswith("127.")] + [a for a in unique if a.startswith("127.")]


def _keepalive(sock: socket.socket) -> None:
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
    idle, interval, count = KEEPALIVE_S
    for name, value in (("TCP_KEEPIDLE", idle), ("TCP_KEEPINTVL", interval), ("TCP_KEEPCNT", count)):
        if hasattr(socket, name):
            sock.setsockopt(socket.IPPROTO_TCP, getattr(socket, name), value)


def _say(text: str) -> None:
    try:
        sys.stderr.write(text)
        sys.stderr.flush()
    except Exception:  # noqa: BLE001 - the exit matters more
        pass


class PeerWatch:
    """Connections from every rank to rank 0 that end the job when a rank vanishes (collective to create).

    Parameters
    ----------
    comm : mpi4py.MPI.Comm
        The job's communicator; every rank must call. Used only at
        construction (to publish rank 0's addresses and agree that every
        connection was made).
    on_vanished : callable, optional
        Rank 0: ``on_vanished(rank, message)``, run on the watching thread when
        a rank vanishes, before the others are stopped (exceptions are
        swallowed).
    prog : str
        The program's name, for the line printed on stderr.

    Attributes
    ----------
    active : bool
        Whether the watch runs (False where a connection could not be made:
        ``reason`` says why; the job runs without it).
    reason : str
        Why the watch does not run (``""`` when it does).
    """

    def __init__(self, comm, on_vanished: Callable[[int, str], None] | None = None, prog: str = "hpcbench") -> None:
        self.rank = comm.rank
        self.size = comm.size
        self.on_vanished = on_vanished
        self.prog = prog
        self.active = False
        self.reason = ""
        self._closing = threading.Event()
        self._thread: threading.Thread | None = None
        self._server: socket.socket | None = None
        self._peers: dict[int, socket.socket] = {}      # rank 0: rank -> connection
        self._said: set[int] = set()                    # rank 0: ranks that said goodbye or failing
        self._up: socket.socket | None = None           # other ranks: the connection to rank 0
        self._wake_r, self._wake_w = socket.socketpair()
        error = ""
        if self.rank == 0:
            try:
                self._server = socket.create_server(("", 0), family=socket.AF_INET, backlog=max(128, self.size))
                where = (interface_addresses(), self._server.getsockname()[1], socket.gethostname())
            except OSError as exc:
                error, where = f"rank 0 cannot listen: {exc}", None
        else:
            where = None
        where = comm.bcast(where, root=0)
        if where is not None and self.rank != 0:
            error = self._connect(*where)
        if where is not None and self.rank == 0:
            error = self._accept(where[1])
        errors = [(r, e) for r, e in enumerate(comm.allgather(error)) if e]
        if errors:
            self.reason = "; ".join(f"rank {r}: {e}" for r, e in errors[:4])
            self._close_sockets()
            if self.rank == 0:
                _say(f"{prog}: warning: no watch for vanished ranks across hosts ({self.reason}); a rank killed "
                     f"on one host may leave the others waiting\n")
            return
        self.active = True
        target = self._watch_ranks if self.rank == 0 else self._watch_root
        self._thread = threading.Thread(target=target, name="hpcbench-peer-watch", daemon=True)
        self._thread.start()

    # -- set-up ---------------------------------------------------------------------------------
    def _connect(self, addresses: list[str], port: int, host0: str) -> str:
        """Connect to rank 0 (loopback first on its own host); ``""`` or what failed."""
        order = list(addresses)
        if socket.gethostname() == host0:
            order = [a for a in order if a.startswith("127.")] + [a for a in order if not a.startswith("127.")]
        tried = []
        for address in order:
            try:
                sock = socket.create_connection((address, port), timeout=CONNECT_TIMEOUT_S)
            except OSError as exc:
                tried.append(f"{address}: {exc.strerror or exc}")
                continue
            try:
                sock.settimeout(None)
                _keepalive(sock)
                sock.sendall(_RANK.pack(self.rank))
            except OSError as exc:
                sock.close()
                tried.append(f"{address}: {exc.strerror or exc}")
                continue
            self._up = sock
            return ""
        return f"cannot reach rank 0 on port {port} ({'; '.join(tried) or 'no address'})"

    def _accept(self, port: int) -> str:
        """Accept one connection from every other rank; ``""`` or what is missing."""
        deadline = time.monotonic() + 10 * CONNECT_TIMEOUT_S
        while len(self._peers) < self.size - 1:
            left = deadline - time.monotonic()
            if left <= 0:
                missing = sorted(set(range(1, self.size)) - set(self._peers))
                return f"ranks {missing[:8]} did not connect to port {port} within {10 * CONNECT_TIMEOUT_S:.0f} s"
            self._server.settimeout(left)
            try:
                sock, _ = self._server.accept()
                sock.settimeout(left)
                raw = b""
                while len(raw) < _RANK.size:
                    part = sock.recv(_RANK.size - len(raw))
                    if not part:
                        raise OSError("closed before naming its rank")
                    raw += part
            except OSError:
                continue
            sock.settimeout(None)
            _keepalive(sock)
            self._peers[_RANK.unpack(raw)[0]] = sock
        return ""

    # -- watching -------------------------------------------------------------------------------
    def _watch_ranks(self) -> None:
        """Rank 0: wait for a connection that ends without a goodbye."""
        sel = selectors.DefaultSelector()
        sel.register(self._wake_r, selectors.EVENT_READ, None)
        for r, sock in self._peers.items():
            sel.register(sock, selectors.EVENT_READ, r)
        try:
            while not self._closing.is_set():
                for key, _ in sel.select():
                    r = key.data
                    if r is None:
                        return
                    try:
                        data = key.fileobj.recv(64)
                    except OSError:
                        data = b""
                    if data:
                        if _GOODBYE in data or _FAILING in data:
                            self._said.add(r)
                        continue
                    sel.unregister(key.fileobj)
                    if r not in self._said and not self._closing.is_set():
                        self._vanished(r)
        finally:
            sel.close()

    def _vanished(self, r: int) -> None:
        """Rank 0: rank ``r`` vanished: mark, stop every other rank, leave with status 1."""
        message = ("vanished (its process ended without a word: killed, out of memory or a native crash); every "
                   "rank was stopped")
        _say(f"{self.prog}: error: rank {r}: {message}\n")
        if self.on_vanished is not None:
            try:
                self.on_vanished(r, message)
            except Exception:  # noqa: BLE001 - stopping the others matters more
                pass
        notice = _STOP + _RANK.pack(r)
        for other, sock in self._peers.items():
            if other != r:
                try:
                    sock.sendall(notice)
                except OSError:
                    pass
        _leave(1)

    def _watch_root(self) -> None:
        """A rank other than 0: leave on rank 0's stop notice, or when its connection ends without a goodbye."""
        sel = selectors.DefaultSelector()
        sel.register(self._wake_r, selectors.EVENT_READ, "wake")
        sel.register(self._up, selectors.EVENT_READ, "up")
        data, failing = b"", False
        try:
            while not self._closing.is_set():
                for key, _ in sel.select():
                    if key.data == "wake":
                        return
                    try:
                        part = self._up.recv(64)
                    except OSError:
                        part = b""
                    data += part
                    while data[:1] in (_GOODBYE, _FAILING):
                        if data[:1] == _GOODBYE:
                            return                    # rank 0 ended cleanly: nothing left to watch
                        failing, data = True, data[1:]
                    if data[:1] == _STOP and (len(data) > _RANK.size or not part):
                        gone = _RANK.unpack(data[1:1 + _RANK.size])[0] if len(data) > _RANK.size else -1
                        self._stop_here(f"rank {gone} vanished")
                        return
                    if not part:
                        if not failing:
                            self._stop_here("rank 0 vanished (its process ended without a word)")
                        return
        finally:
            sel.close()

    def _stop_here(self, why: str) -> None:
        if not self._closing.is_set():
            _say(f"{self.prog}: rank {self.rank}: stopped: {why}\n")
            _leave(1)

    # -- goodbyes -------------------------------------------------------------------------------
    def _send_all(self, byte: bytes) -> None:
        for sock in ([self._up] if self._up is not None else []) + list(self._peers.values()):
            try:
                sock.sendall(byte)
            except OSError:
                pass

    def farewell(self) -> None:
        """Say that this rank fails in a way the lifecycle handles (a notice and ``MPI_Abort`` follow): its
        connection's end is then not a vanished rank. Idempotent; never raises."""
        if self.active:
            self._send_all(_FAILING)

    def close(self) -> None:
        """Say goodbye and stop watching (a clean end; before ``MPI_Finalize``). Idempotent; never raises."""
        if self._closing.is_set():
            return
        self._closing.set()
        if self.active:
            self._send_all(_GOODBYE)
        try:
            self._wake_w.send(b"x")
        except OSError:
            pass
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout=5.0)
        self._thread = None
        self._close_sockets()

    def _close_sockets(self) -> None:
        for sock in [self._server, self._up, *self._peers.values(), self._wake_r, self._wake_w]:
            if sock is not None:
                try:
                    sock.close()
                except OSError:
                    pass
        self._server, self._up = None, None
        self._peers = {}

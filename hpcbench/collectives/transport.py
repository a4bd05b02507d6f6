"""Point-to-point layer under every hpcbench collective.

Every collective algorithm moves bytes only through a :class:`Transport`, so a
different transport (e.g. the link model of ``hpcbench.collectives.linkmodel``
that makes each message take the time a modelled network would take) changes
how messages travel without touching any algorithm.

Requests returned here follow mpi4py's shape: ``test()`` and ``wait()``, and
``Request.waitall(requests)``. Waiting polls and sleeps with backoff (see
:mod:`hpcbench.runtime.wait`), so oversubscribed ranks do not steal CPU.
"""

from __future__ import annotations

import time
from typing import Sequence

import numpy as np
from mpi4py import MPI

from hpcbench.runtime.wait import Backoff

__all__ = ["P2PRequest", "Transport"]


class P2PRequest:
    """A pending point-to-point operation.

    Parameters
    ----------
    request : mpi4py.MPI.Request
        The underlying nonblocking MPI request.
    nbytes : int
        Payload size in bytes.
    on_done : callable, optional
        ``on_done(nbytes)`` once, when the request is first seen complete
        (a transport's traffic meter, :attr:`Transport.meter`).
    """

    __slots__ = ("_request", "nbytes", "_done", "_on_done")

    def __init__(self, request: MPI.Request, nbytes: int, on_done=None) -> None:
        self._request = request
        self.nbytes = nbytes
        self._done = False
        self._on_done = on_done

    def test(self) -> bool:
        """True once the operation has completed (never blocks)."""
        if not self._done:
            self._done = bool(self._request.Test())
            if self._done and self._on_done is not None:
                self._on_done(self.nbytes)
                self._on_done = None
        return self._done

    def wait(self, backoff: Backoff | None = None) -> None:
        """Block until complete, sleeping between polls."""
        backoff = backoff or Backoff(spin=64)
        while not self.test():
            backoff.pause()

    @staticmethod
    def waitall(requests: Sequence["P2PRequest"], backoff: Backoff | None = None) -> None:
        """Block until every request of ``requests`` has completed."""
        backoff = backoff or Backoff(spin=64)
        pending = [r for r in requests if not r.test()]
        while pending:
            backoff.pause()
            pending = [r for r in pending if not r.test()]


class Transport:
    """Direct MPI point-to-point transport (``Isend``/``Irecv`` on ``comm``).

    Parameters
    ----------
    comm : mpi4py.MPI.Comm
        Communicator whose ranks exchange messages.

    Attributes
    ----------
    bytes_sent : int
        Payload bytes this rank has sent through the transport.
    messages_sent : int
        Number of messages this rank has sent.
    meter : object or None
        Where the traffic is metered (None: not metered): ``sent(nbytes,
        start, end)`` and ``received(nbytes, start, end)`` with the times a
        message's bytes were on the wire, ``time.monotonic()`` seconds
        (:class:`hpcbench.telemetry.TrafficMeters`). Here, without a link
        model, a send is metered when it is posted and a receive from its
        posting to its completion; :class:`~hpcbench.collectives.linkmodel.LinkTransport`
        meters the modelled wire times.
    """

    def __init__(self, comm: MPI.Comm) -> None:
        self.comm = comm
        self.bytes_sent = 0
        self.messages_sent = 0
        self.meter = None

    @property
    def rank(self) -> int:
        return self.comm.rank

    @property
    def world_size(self) -> int:
        """Ranks of the communicator (``comm.size``)."""
        return self.comm.size

    def isend(self, buf: np.ndarray, dest: int, tag: int) -> P2PRequest:
        """Nonblocking send of contiguous array ``buf`` to rank ``dest``."""
        self.bytes_sent += buf.nbytes
        self.messages_sent += 1
        if self.meter is not None:
            now = time.monotonic()
            self.meter.sent(buf.nbytes, now, now)
        return P2PRequest(self.comm.Isend(_mpi_buffer(buf), dest=dest, tag=tag), buf.nbytes)

    def irecv(self, buf: np.ndarray, source: int, tag: int) -> P2PRequest:
        """Nonblocking receive into contiguous array ``buf`` from rank ``source``."""
        done = None
        if self.meter is not None:
            meter, posted = self.meter, time.monotonic()
            done = lambda n: meter.received(n, posted, time.monotonic())    # noqa: E731
        return P2PRequest(self.comm.Irecv(_mpi_buffer(buf), source=source, tag=tag), buf.nbytes, done)

    def exchange_init(self, sendbuf: np.ndarray, dest: int, recvbuf: np.ndarray, source: int,
                      tag: int) -> tuple[MPI.Prequest, MPI.Prequest]:
        """Persistent receive and send (``Recv_init``, ``Send_init``) with the buffer spec of
        :meth:`isend`/:meth:`irecv`, so either form matches the other; not counted
        here: a run of the pair counts through :meth:`count`.

        Returns
        -------
        (MPI.Prequest, MPI.Prequest)
            The receive's request, then the send's (inactive until started).
        """
        return (self.comm.Recv_init(_mpi_buffer(recvbuf), source, tag),
                self.comm.Send_init(_mpi_buffer(sendbuf), dest, tag))

    @staticmethod
    def buffer_spec(buf: np.ndarray) -> list:
        """The buffer spec :meth:`isend` and :meth:`irecv` give MPI for ``buf``, for callers
        that post the same buffers many times (``comm.Isend(spec, ...)``)."""
        return _mpi_buffer(buf)

    def count(self, nbytes: int, messages: int) -> None:
        """Add sends made outside :meth:`isend` (started persistent requests) to the counters."""
        self.bytes_sent += nbytes
        self.messages_sent += messages

    def sendrecv(self, sendbuf: np.ndarray, dest: int, recvbuf: np.ndarray, source: int,
                 tag: int) -> None:
        """Exchange: send ``sendbuf`` to ``dest`` while receiving ``recvbuf`` from ``source``."""
        reqs = [self.irecv(recvbuf, source, tag), self.isend(sendbuf, dest, tag)]
        P2PRequest.waitall(reqs)


def _mpi_buffer(buf: np.ndarray):
    """Buffer spec for mpi4py: raw bytes, so that any dtype (bfloat16 too) travels.

    ``[buf, MPI.BYTE]``: with an explicit datatype mpi4py takes the array's
    whole memory as bytes, whatever its dtype and shape (the same bytes as a
    ``uint8`` view, without building one per message).
    """
    if not buf.flags.c_contiguous:
        raise ValueError("transport buffers must be C-contiguous")
    return [buf, MPI.BYTE]

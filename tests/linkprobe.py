"""Run by every rank of a job on emulated hosts with a network (tests/test_multihost_link.py): what crossed the
link, and how long a transfer or a round trip between two hosts took. Rank 0 prints one JSON list, an object
per rank.

    python tests/linkprobe.py allreduce BYTES      # allreduce; bytes this host's interface sent meanwhile
    python tests/linkprobe.py transfer BYTES       # rank 0 sends BYTES to the last rank, which answers 1 byte
    python tests/linkprobe.py pingpong COUNT       # COUNT round trips of 8 bytes between rank 0 and the last rank
"""

import json
import socket
import sys
import time

import numpy as np
from mpi4py import MPI


def sent_bytes():
    """Bytes this host's interface (hpcb0, in its network namespace) has sent; -1 outside a network."""
    try:
        with open("/sys/class/net/hpcb0/statistics/tx_bytes") as f:
            return int(f.read())
    except OSError:
        return -1


def main():
    comm = MPI.COMM_WORLD
    mode, amount = sys.argv[1], int(sys.argv[2])
    rank, last = comm.rank, comm.size - 1
    out = {"rank": rank, "host": socket.gethostname(), "address": socket.gethostbyname(socket.gethostname())}
    small = np.zeros(8, np.uint8)
    comm.Barrier()
    if mode == "allreduce":
        a = np.full(amount // 4, rank + 1, np.float32)
        b = np.empty_like(a)
        before = sent_bytes()
        comm.Allreduce(a, b)
        comm.Barrier()
        out.update(sent=sent_bytes() - before, correct=bool(np.all(b == comm.size * (comm.size + 1) / 2)))
    elif mode == "transfer":
        payload = np.ones(amount, np.uint8)
        t0 = time.perf_counter()
        if rank == 0:
            comm.Send(payload, last)
            comm.Recv(small[:1], last)
        elif rank == last:
            comm.Recv(payload, 0)
            comm.Send(small[:1], 0)
        out.update(seconds=time.perf_counter() - t0)
    elif mode == "pingpong":
        if rank in (0, last):  # the first message also opens the connection: not timed
            comm.Sendrecv(small.copy(), last - rank, recvbuf=small, source=last - rank)
        t0 = time.perf_counter()
        for _ in range(amount):
            if rank == 0:
                comm.Send(small, last)
                comm.Recv(small, last)
            elif rank == last:
                comm.Recv(small, 0)
                comm.Send(small, 0)
        out.update(seconds=time.perf_counter() - t0)
    else:
        raise SystemExit(f"linkprobe: unknown mode {mode!r}")
    rows = comm.gather(out)
    if rank == 0:
        print("LINKPROBE " + json.dumps(rows), flush=True)


if __name__ == "__main__":
    main()

"""Run by every rank of a job on emulated hosts (tests/test_multihost.py): the modelled link of
``LinkTransport(scope="between_hosts")`` as the host's ranks share it. Every rank of the first host sends BYTES
to the first rank of the last host at once, over a 100 Mbit/s modelled link; rank 0 prints one JSON list, per
sender its rank and the modelled completion of its message (``ready_at``, monotonic seconds), and the modelled
transfer time of one message alone.

    python tests/cardprobe.py BYTES
"""

import json
import sys

import numpy as np
from mpi4py import MPI

from hpcbench.collectives.linkmodel import LinkTransport
from hpcbench.runtime.hosts import host_groups


def main():
    comm = MPI.COMM_WORLD
    nbytes = int(sys.argv[1])
    groups = host_groups(comm)
    first, target = groups[0], groups[-1][0]
    lt = LinkTransport(comm, alpha=0.0, beta="100Mbit", scope="between_hosts")
    out = {"rank": comm.rank, "tx": 8.0 * nbytes / 1e8}
    comm.Barrier()
    if comm.rank in first:
        req = lt.isend(np.ones(nbytes, np.uint8), target, 7)
        out["ready_at"] = req.ready_at
        req.wait()
    elif comm.rank == target:
        bufs = [np.empty(nbytes, np.uint8) for _ in first]
        for q in [lt.irecv(b, r, 7) for b, r in zip(bufs, first)]:
            q.wait()
    comm.Barrier()
    rows = comm.gather(out)
    lt.free()
    if comm.rank == 0:
        print("CARDPROBE " + json.dumps([r for r in rows if "ready_at" in r]), flush=True)


if __name__ == "__main__":
    main()

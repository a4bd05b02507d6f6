"""Refuse a job whose configured sizes cannot fit in its nodes' memory, before anything is allocated.

A runner estimates, from its config alone, the bytes one rank will hold at
its peak (:meth:`hpcbench.lifecycle.job.Job.memory_need`: model
parameters, gradients, activations, message buffers). The lifecycle sums the
estimates of the ranks sharing a node and compares the sum with the memory
the node has available (``psutil.virtual_memory().available``); a job that
cannot fit ends with exit status 2 and a message naming the config keys
that set the sizes, instead of swapping for hours or being killed half way
with a truncated result file. Estimates are lower bounds of the real peak
(Python, MPI and library overheads are left out), so a refusal is certain to
be right; a job that passes may still be tight.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["MemoryNeed", "format_bytes", "available_bytes", "node_memory_error"]


@dataclass(frozen=True)
class MemoryNeed:
    """One rank's estimated peak memory.

    Attributes
    ----------
    nbytes : int
        Bytes this rank will hold at its peak.
    keys : str
        The config keys (and values) that set the size, for the message
        (``"image_size=100000, batch_size=32 (model resnet18)"``).
    """

    nbytes: int
    keys: str


def format_bytes(n: float) -> str:
    """``n`` bytes as ``"960 GB"`` (powers of 1000; beyond 1000 PB as ``"2.1e+22 B"``)."""
    if n >= 1e18:
        return f"{n:.2g} B"
    for unit, scale in (("PB", 1e15), ("TB", 1e12), ("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if n >= scale:
            return f"{n / scale:.3g} {unit}"
    return f"{int(n)} B"


def available_bytes() -> int:
    """Memory the node has available for new processes (``psutil.virtual_memory().available``)."""
    import psutil

    return int(psutil.virtual_memory().available)


def node_memory_error(comm, need: MemoryNeed | None) -> str | None:
    """The refusal for this rank's node, or None when the node's ranks fit (collective over ``comm``).

    Every rank passes its own estimate (None: nothing to check; then every
    rank must pass None, and nothing is communicated). Ranks are grouped by
    host name; each rank compares its host's sum with the host's available
    memory.

    Returns
    -------
    str or None
        ``"memory: KEYS need about X per rank x N ranks on HOST = Y; Z available"``.
    """
    if need is None:
        return None
    from hpcbench.runtime.hosts import hostname

    host = hostname()
    if comm.size > 1:
        from hpcbench.runtime.wait import Backoff, sleep_barrier

        sleep_barrier(comm, Backoff(first_s=1e-3, max_s=5e-2))
        everyone = comm.allgather((host, int(need.nbytes)))
    else:
        everyone = [(host, int(need.nbytes))]
    mine = [n for h, n in everyone if h == host]
    total, free = sum(mine), available_bytes()
    if total <= free:
        return None
    per_rank = (f"{format_bytes(need.nbytes)} per rank x {len(mine)} ranks on {host} = {format_bytes(total)}"
                if len(mine) > 1 else f"{format_bytes(total)} on {host}")
    return (f"memory: {need.keys} need about {per_rank}; {format_bytes(free)} available "
            f"(smaller sizes, or fewer ranks per node)")

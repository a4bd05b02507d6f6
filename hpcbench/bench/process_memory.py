"""Resident memory of a whole process tree (a launcher and every descendant), sampled over time.

Used by ``hpcbench fl-bench`` to measure the MPI job (``mpiexec``, its
process manager and the ranks) and the Flower simulation (its driver, Ray's
GCS server, raylet, dashboard agents and worker processes) the same way, from
outside both trees. Linux only: it reads ``/proc``.

Two measures, both summed over the tree:

- RSS (``Rss`` of ``/proc/PID/smaps_rollup``): every process's resident
  pages, so a shared library page mapped by ``k`` processes counts ``k``
  times (what ``ps``/``top`` show per process, added up);
- PSS (``Pss``, proportional set size): each resident page divided by the
  number of processes mapping it, so shared pages (``libtorch``, the Python
  interpreter, Ray's shared-memory object store) count once in the sum. PSS
  summed over a tree is the memory the tree costs the machine.
"""

from __future__ import annotations

import os
import threading
import time
from dataclasses import dataclass, field

__all__ = ["TreeMemory", "TreeSampler", "descendants", "tree_memory"]


def _children_map() -> dict[int, list[int]]:
    """Parent pid -> child pids of every process visible in ``/proc``."""
    out: dict[int, list[int]] = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as f:
                stat = f.read()
        except OSError:  # exited meanwhile
            continue
        # the command name (field 2) may hold spaces and parentheses: split after its last ')'
        ppid = int(stat[stat.rindex(b")") + 2:].split()[1])
        out.setdefault(ppid, []).append(int(name))
    return out


def descendants(pid: int) -> list[int]:
    """``pid`` and all its live descendants (depth first), read from ``/proc``.

    Parameters
    ----------
    pid : int
        Root process id (always listed first, even if it does not exist).

    Returns
    -------
    list of int
        Process ids: ``pid``, then its descendants in depth-first
        order, from one snapshot of the parent links in ``/proc`` (processes
        that exit while it is read are left out).

    Raises
    ------
    OSError
        ``/proc`` cannot be listed (not Linux).
    """
    children = _children_map()
    out, stack = [], [pid]
    while stack:
        p = stack.pop()
        out.append(p)
        stack.extend(children.get(p, ()))
    return out


def _rollup(pid: int) -> tuple[int, int] | None:
    """``(Rss, Pss)`` bytes of one process from ``smaps_rollup``; None if it is gone or unreadable."""
    rss = pss = None
    try:
        with open(f"/proc/{pid}/smaps_rollup") as f:
            for line in f:
                if line.startswith("Rss:"):
                    rss = int(line.split()[1]) * 1024
                elif line.startswith("Pss:"):
                    pss = int(line.split()[1]) * 1024
    except OSError:
        return None
    if rss is None or pss is None:  # a zombie or kernel thread has no mappings
        return None
    return rss, pss


@dataclass
class TreeMemory:
    """One sample of a process tree's memory.

    Attributes
    ----------
    rss_bytes, pss_bytes : int
        Sum over the tree's processes of ``Rss`` and of ``Pss`` (bytes).
    processes : int
        Processes counted (those whose ``smaps_rollup`` could be read).
    by_name : dict of str to tuple of int
        Command name (``/proc/PID/comm``) -> (RSS, PSS, count) summed over the processes of that name.
    """

    rss_bytes: int = 0
    pss_bytes: int = 0
    processes: int = 0
    by_name: dict = field(default_factory=dict)


def tree_memory(pid: int) -> TreeMemory:
    """RSS and PSS of ``pid`` and every descendant, now (see the module docstring).

    Parameters
    ----------
    pid : int
        Root of the process tree (see :func:`descendants`).

    Returns
    -------
    TreeMemory
        Sums in bytes over the processes whose ``smaps_rollup`` could be
        read (gone, unreadable, zombie processes and kernel threads are
        skipped), with the per-command-name breakdown in ``by_name``; all
        zero if none could be read.

    Raises
    ------
    OSError
        ``/proc`` cannot be listed (not Linux).
    """
    out = TreeMemory()
    for p in descendants(pid):
        got = _rollup(p)
        if got is None:
            continue
        try:
            with open(f"/proc/{p}/comm") as f:
                name = f.read().strip()
        except OSError:
            name = "?"
        rss, pss, n = out.by_name.get(name, (0, 0, 0))
        out.by_name[name] = (rss + got[0], pss + got[1], n + 1)
        out.rss_bytes += got[0]
        out.pss_bytes += got[1]
        out.processes += 1
    return out


class TreeSampler:
    """Sample :func:`tree_memory` of a running process every ``interval_s`` in a background thread.

    Use as a context manager around the wait for the process; afterwards
    ``samples`` holds ``(time.time(), TreeMemory)`` pairs and :meth:`peak`
    the largest sums over a time window.

    Parameters
    ----------
    pid : int
        Root of the tree (e.g. ``subprocess.Popen(...).pid``).
    interval_s : float
        Seconds between samples (reading ``smaps_rollup`` of a 1 GB process
        takes a few milliseconds of this process's CPU).
    """

    def __init__(self, pid: int, interval_s: float = 0.5) -> None:
        self.pid = pid
        self.interval_s = interval_s
        self.samples: list[tuple[float, TreeMemory]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def _loop(self) -> None:
        while not self._stop.is_set():
            self.samples.append((time.time(), tree_memory(self.pid)))
            self._stop.wait(self.interval_s)

    def __enter__(self) -> "TreeSampler":
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()

    def peak(self, start: float = 0.0, end: float = float("inf")) -> TreeMemory:
        """Largest sums over the samples taken in ``[start, end]`` (``time.time()`` seconds).

        ``rss_bytes`` and ``pss_bytes`` are each their own maximum (they may
        come from different samples); ``processes`` and ``by_name`` are those
        of the sample with the largest PSS.

        Raises
        ------
        ValueError
            If no sample falls in the window.
        """
        window = [m for t, m in self.samples if start <= t <= end]
        if not window:
            raise ValueError(f"no memory sample between {start:.1f} and {end:.1f}")
        top = max(window, key=lambda m: m.pss_bytes)
        return TreeMemory(max(m.rss_bytes for m in window), top.pss_bytes, top.processes, top.by_name)

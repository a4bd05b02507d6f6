"""Resize latency of the elastic worker set (KungFu's figure 7: grow 1 -> 2 took 20.39 s, shrink 2 -> 1 40.12 ms).

Run with as many ranks as the largest worker set (ranks beyond the active
count wait in the warm pool, sleeping: 16 ranks on 2 cores are fine):

    mpiexec -n 16 python scripts/resize_latency.py                 # warm pool, 3 models, 1<->2 and 8<->16
    mpiexec -n 16 python scripts/resize_latency.py --spawn         # also new processes, ResNet-50's state

The state moved is a real replica's (``hpcbench.train.adaptation.elastic.pack_state``:
``model.state_dict()`` and the SGD optimizer's state) of ResNet-50 (102 MB),
ResNet-18 (47 MB) and the digits CNN, built once on rank 0 and broadcast
before timing. One resize, as the training runner does it
(``hpcbench/train/adaptation/elastic.py``):

- agreement: the policies' exchange (one allgather of 5 float64 per policy);
- warm pool: waking the pool and splitting the world (grow) or the active
  communicator (shrink); spawn: ``MPI_Comm_spawn`` (process start), the
  children's imports (torch, hpcbench's training runner), ``Merge``;
- state: rank 0's context and the state bytes to each new worker from one
  old worker;
- rebuild: the old synchroniser closed, a duplicate communicator, transport
  and hpcbench's ring synchroniser on it.

``total`` is end to end: from the earliest old rank's start to the last
rank's end (one node: one monotonic clock), the median over ``--repeats``.
Targets (issue 21): grow <= 1 s, shrink <= 50 ms (warm pool, ResNet-50).
"""

from __future__ import annotations

import argparse
import sys
import time

import numpy as np
from mpi4py import MPI

from hpcbench.runtime.wait import sleep_allgather, sleep_barrier, sleep_bcast

PHASES = ("agreement", "process_start", "imports", "connection", "communicator", "state", "rebuild")
TARGET_S = {"grow": 1.0, "shrink": 0.050}
KUNGFU_S = {"grow": 20.39, "shrink": 0.04012}


def _state(model: str) -> np.ndarray:
    import torch

    from hpcbench.train.adaptation.elastic import pack_state
    from hpcbench.train.workloads.models import build_model

    torch.set_num_threads(1)
    m = build_model(model, 0)
    return pack_state(m, torch.optim.SGD(m.parameters(), lr=0.01))[1]


def _rebuild(comm, old):
    """The new set's synchroniser (what the runner rebuilds), after closing the old one."""
    from hpcbench.collectives.transport import Transport
    from hpcbench.sync import build

    if old is not None:
        old.close()
    dup = comm.Dup()
    return build("ring", dup, Transport(dup), bucket_bytes=25 << 20), dup


def _free(sync, dup):
    if sync is not None:
        sync.close()
        dup.Free()


def warm_pool(world, n0: int, n1: int, state: np.ndarray) -> dict:
    """One resize n0 -> n1 in the warm pool; this rank's phases and (start, end) times."""
    from hpcbench.runtime.workerset import WorkerSet

    ws = WorkerSet(world, n0)
    sync = dup = None
    if ws.active:
        sync, dup = _rebuild(ws.comm, None)
    sleep_barrier(world)
    out = dict.fromkeys(PHASES, 0.0)
    start = end = np.nan
    if world.rank < n0:
        start = time.perf_counter()
        t = time.perf_counter()
        sleep_allgather(ws.comm, np.zeros(5))
        out["agreement"] = time.perf_counter() - t
        ph = ws.resize(n1, {"step": 0}, state if n1 > n0 else None)
        out.update(communicator=ph.notify_s + ph.communicator_s, state=ph.state_s)
        t = time.perf_counter()
        if ws.active:
            old_dup = dup
            sync, dup = _rebuild(ws.comm, sync)
            old_dup.Free()
        else:
            sync.close()
            dup.Free()
            sync = dup = None
        out["rebuild"] = time.perf_counter() - t
        end = time.perf_counter()
        if not ws.active:
            end = np.nan
            ws.wait()
    elif world.rank < n1:
        act = ws.wait()
        out.update(communicator=act.phases.communicator_s, state=act.phases.state_s)
        t = time.perf_counter()
        sync, dup = _rebuild(ws.comm, None)
        out["rebuild"] = time.perf_counter() - t
        end = time.perf_counter()
    else:
        ws.wait()
    _free(sync, dup)
    ws.close()
    return {**out, "start": start, "end": end, "bytes": state.nbytes * max(0, n1 - n0)}


def spawned(world, n0: int, n1: int, state: np.ndarray, argv) -> tuple[dict, dict]:
    """Grow n0 -> n1 with new processes, then shrink back (the children exit); this rank's phases of each."""
    from hpcbench.runtime.spawnpool import spawn_grow

    comm = world.Split(0 if world.rank < n0 else MPI.UNDEFINED, world.rank)
    grow, shrink = dict.fromkeys(PHASES, 0.0), dict.fromkeys(PHASES, 0.0)
    if comm == MPI.COMM_NULL:
        sleep_barrier(world)
        return {**grow, "start": np.nan, "end": np.nan}, {**shrink, "start": np.nan, "end": np.nan}
    sync, dup = _rebuild(comm, None)
    start = time.perf_counter()
    sleep_allgather(comm, np.zeros(5))
    grow["agreement"] = time.perf_counter() - start
    inter, merged, ph = spawn_grow(comm, n1 - n0, argv, {"step": 0}, state)
    grow.update(process_start=ph.process_start_s, imports=ph.extra["imports_s"],
                connection=ph.extra["connection_s"], communicator=ph.communicator_s, state=ph.state_s)
    t = time.perf_counter()
    old_dup = dup
    sync, dup = _rebuild(merged, sync)
    old_dup.Free()
    grow["rebuild"] = time.perf_counter() - t
    grow_end = time.perf_counter()
    child_end = np.zeros(1)
    from hpcbench.runtime.wait import sleep_wait

    sleep_wait(merged.Ireduce(MPI.IN_PLACE if merged.rank == 0 else np.zeros(1), child_end, op=MPI.MAX, root=0))
    grow_end = max(grow_end, float(child_end[0]))
    sleep_barrier(merged)
    s0 = time.perf_counter()                  # shrink: the children leave
    sleep_allgather(merged, np.zeros(5))
    shrink["agreement"] = time.perf_counter() - s0
    t = time.perf_counter()
    small = merged.Split(0, merged.rank)      # the children pass UNDEFINED
    shrink["communicator"] = time.perf_counter() - t
    t = time.perf_counter()
    sync.close()
    dup.Free()
    sync, dup = _rebuild(small, None)
    shrink["rebuild"] = time.perf_counter() - t
    s1 = time.perf_counter()
    merged.Free()
    inter.Disconnect()
    _free(sync, dup)
    small.Free()
    comm.Free()
    sleep_barrier(world)
    return {**grow, "start": start, "end": grow_end}, {**shrink, "start": s0, "end": s1}


def child() -> None:
    """A spawned worker: imports, joins, rebuilds the synchroniser, then leaves at the shrink."""
    from hpcbench.runtime.spawnpool import join_parents
    from hpcbench.runtime.wait import sleep_wait

    def imports():
        import torch  # noqa: F401

        import hpcbench.train.steps.loop  # noqa: F401
        import hpcbench.train.steps.worker  # noqa: F401

    parent, merged, _, _ = join_parents(imports)
    sync, dup = _rebuild(merged, None)
    sleep_wait(merged.Ireduce(np.array([time.perf_counter()]), None, op=MPI.MAX, root=0))
    sleep_barrier(merged)
    sleep_allgather(merged, np.zeros(5))
    merged.Split(MPI.UNDEFINED, merged.rank)
    sync.close()
    dup.Free()
    merged.Free()
    parent.Disconnect()


def summarise(world, rows: list[dict]):
    """Every rank's rows to rank 0: per repeat, the phases' maxima over ranks and the end-to-end time."""
    allrows = world.gather(rows, root=0)
    if world.rank:
        return None
    out = []
    for i in range(len(rows)):
        per = [r[i] for r in allrows]
        out.append({**{k: max(p[k] for p in per) for k in PHASES},
                    "total": np.nanmax([p["end"] for p in per]) - np.nanmin([p["start"] for p in per])})
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default="resnet50,resnet18,digits_cnn")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--spawn", action="store_true", help="also grow with new processes (MPI_Comm_spawn), with the "
                                                          "first model's state")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        child()
        return 0
    world = MPI.COMM_WORLD
    p = world.size
    cases = [(a, b) for a, b in ((1, 2), (2, 1), (8, 16), (16, 8)) if max(a, b) <= p]
    table = []
    for model in args.models.split(","):
        state = sleep_bcast(world, _state(model) if world.rank == 0 else None)
        for n0, n1 in cases:
            kind = "grow" if n1 > n0 else "shrink"
            rows = [warm_pool(world, n0, n1, state) for _ in range(args.repeats)]
            table.append((model, state.nbytes, n0, n1, kind, "warm_pool", summarise(world, rows)))
        if args.spawn and model == args.models.split(",")[0]:
            for n0, n1 in [(1, 2), (8, 16)]:
                if n0 > p:
                    continue
                both = [spawned(world, n0, n1, state, [__file__, "--child"]) for _ in range(args.repeats)]
                table.append((model, state.nbytes, n0, n1, "grow", "spawn", summarise(world, [g for g, _ in both])))
                table.append((model, state.nbytes, n1, n0, "shrink", "spawn",
                              summarise(world, [s for _, s in both])))
        del state
    if world.rank == 0:
        _print(table, p, args.repeats)
    return 0


def _print(table, p: int, repeats: int) -> None:
    print(f"Resize latency, {p} ranks started, median of {repeats} (ms; phases: slowest rank)")
    head = ["model", "state MB", "resize", "mode", *PHASES, "total", "target", "KungFu", "reached"]
    print(" | ".join(head))
    for model, nbytes, n0, n1, kind, mode, rows in table:
        med = {k: 1e3 * float(np.median([r[k] for r in rows])) for k in (*PHASES, "total")}
        target = TARGET_S[kind] * 1e3
        ok = med["total"] <= target
        print(" | ".join([model, f"{nbytes / 1e6:.1f}", f"{n0}->{n1} {kind}", mode,
                          *(f"{med[k]:.1f}" for k in PHASES), f"{med['total']:.1f}", f"<= {target:g}",
                          f"{KUNGFU_S[kind] * 1e3:g}", "yes" if ok else "NO"]))
    sys.stdout.flush()


if __name__ == "__main__":
    sys.exit(main())

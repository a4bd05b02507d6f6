"""Where a real-compute training step's time goes: the ring's gradient path against no synchronisation and Horovod.

Run at 2 ranks, e.g. ``mpiexec -n 2 python scripts/train_step_costs.py --rounds 10``.
One job builds a replica per variant (same seed) and runs ``--rounds``
rounds, each of ``--steps`` steps of every variant in turn (a barrier
before each block), so a drift of a shared machine's load falls on all of
them alike; the rounds' orders follow a Williams design
(:func:`hpcbench.runtime.interleave.balanced_orders`), as the runner's
``interleave_sync`` does, so every variant follows every other equally
often. Variants (``--variants``):

- ``none``: forward, backward, SGD step, ``zero_grad()``; no communication.
- ``ring-drop``: the ring's gradient buckets as before they kept their
  ``.grad`` views: ``zero_grad(set_to_none=True)`` after the step, so each
  backward allocates the gradients afresh and the hooks copy them.
- ``ring``: the runner's path (:meth:`hpcbench.train.synchronisation.buckets.GradientBuckets.zero`
  after the step: the views stay and backward accumulates in place).
- ``horovod``: Horovod's ``DistributedOptimizer`` (skipped with its reason
  when Horovod cannot be imported).
- ``ring@MB`` (or ``ring-drop@MB``): the same with buckets of ``MB`` MiB
  instead of ``--bucket-mb``.

Prints rank 0's median and mean step (ms), the medians of forward, backward,
the hooks' time on the main thread (copy, norm, starting buckets), the
exposed wait after backward, the optimizer step (with the zeroing), the
process's CPU time over the step (every thread: the main thread's compute
plus what a communication thread burns beside it, which on a machine with
a core per rank slows the other rank's compute or its own), minor page
faults per step, and each variant's mean step over the last one's.
The model and batch are the ``train-targets`` figure's (ResNet-18, 64x64,
batch 32, buckets of 25 MiB, one torch thread per rank).
"""

from __future__ import annotations

import argparse
import resource
import statistics
import time

import torch
from mpi4py import MPI

from hpcbench.runtime.interleave import balanced_orders
from hpcbench.sync import Unavailable, build
from hpcbench.train.synchronisation.buckets import BucketPlan, GradientBuckets
from hpcbench.train.workloads.models import build_model

FIELDS = ("fwd", "bwd", "hooks", "exposed", "opt", "cpu", "faults")


def _replica(variant: str, comm, model: str, bucket_bytes: int):
    """(model, optimizer, buckets or None, hook timer) of one variant."""
    variant, _, mb = variant.partition("@")
    if mb:
        bucket_bytes = int(float(mb) * 2 ** 20)
    m = build_model(model, 0)
    params = [p for p in m.parameters() if p.requires_grad]
    opt = torch.optim.SGD(params, lr=0.01)
    timer = [0.0]
    if variant == "horovod":
        sync = build("horovod", comm.Dup(), bucket_bytes=bucket_bytes)
        _, opt = sync.wrap(m, opt, None)
        return m, opt, None, timer, sync
    if variant == "none":
        return m, opt, None, timer, None
    sync = build("ring", comm.Dup(), bucket_bytes=bucket_bytes)
    b = GradientBuckets(BucketPlan([p.numel() for p in params], bucket_bytes), sync, time.perf_counter)
    add = b.add_grad

    def timed(i, g):
        t = time.perf_counter()
        add(i, g)
        timer[0] += time.perf_counter() - t

    b.add_grad = timed
    b.attach(params)
    return m, opt, b, timer, sync


def _step(variant, rep, x, y) -> dict:
    m, opt, b, timer, _ = rep
    timer[0] = 0.0
    f0 = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    if b is not None:
        b.begin()
    c0 = time.process_time()
    t0 = time.perf_counter()
    loss = torch.nn.functional.cross_entropy(m(x), y)
    t1 = time.perf_counter()
    loss.backward()
    t2 = time.perf_counter()
    if b is not None:
        b.finish()
        t3 = time.perf_counter()
        b.set_grads([p for p in m.parameters() if p.requires_grad])
    else:
        t3 = time.perf_counter()
    opt.step()
    if variant.partition("@")[0] == "ring":
        b.zero()
    else:
        opt.zero_grad()
    t4 = time.perf_counter()
    return dict(step=t4 - t0, fwd=t1 - t0, bwd=t2 - t1, hooks=timer[0], exposed=t3 - t2, opt=t4 - t3,
                cpu=time.process_time() - c0, faults=resource.getrusage(resource.RUSAGE_SELF).ru_minflt - f0)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--variants", default="none,ring-drop,ring,horovod")
    ap.add_argument("--rounds", type=int, default=10)
    ap.add_argument("--steps", type=int, default=4)
    ap.add_argument("--model", default="resnet18")
    ap.add_argument("--image-size", type=int, default=64)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--bucket-mb", type=float, default=25.0)
    a = ap.parse_args()
    comm = MPI.COMM_WORLD
    torch.set_num_threads(1)
    g = torch.Generator().manual_seed(comm.rank)
    x = torch.randn(a.batch, 3, a.image_size, a.image_size, generator=g)
    y = torch.randint(0, 1000, (a.batch,), generator=g)
    reps = {}
    for v in a.variants.split(","):
        try:
            reps[v] = _replica(v, comm, a.model, int(a.bucket_mb * 2 ** 20))
        except Unavailable as exc:
            if comm.rank == 0:
                print(f"{v}: skipped ({exc})")
    for v, rep in reps.items():         # warm-up: the first steps allocate the buckets' views and caches
        for _ in range(2):
            _step(v, rep, x, y)
    res = {v: [] for v in reps}
    names = list(reps)
    orders = balanced_orders(len(names))
    for r in range(a.rounds):
        for v in (names[i] for i in orders[r % len(orders)]):
            rep = reps[v]
            comm.Barrier()
            res[v].extend(_step(v, rep, x, y) for _ in range(a.steps))
    if comm.rank == 0:
        last = list(reps)[-1]
        ref = statistics.mean(r["step"] for r in res[last])
        print(f"{a.model} {a.image_size}x{a.image_size} batch {a.batch}, {comm.size} ranks, {a.rounds} rounds x "
              f"{a.steps} steps; ms (faults: count) per step, rank 0; ratio: throughput over {last}'s (its mean step over this one's)")
        for v, rows in res.items():
            mean = statistics.mean(r["step"] for r in rows)
            med = {k: statistics.median(r[k] for r in rows) for k in ("step", *FIELDS)}
            cols = "  ".join(f"{k} {med[k]:.0f}" if k == "faults" else f"{k} {1e3 * med[k]:.1f}" for k in FIELDS)
            print(f"{v:10s} step mean {1e3 * mean:.1f} median {1e3 * med['step']:.1f}  {cols}  ratio {ref / mean:.3f}")
    for rep in reps.values():
        if rep[4] is not None:
            rep[4].close()


if __name__ == "__main__":
    main()

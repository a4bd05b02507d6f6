"""Sparse optimizer step (hpcbench.optim) against the dense torch.optim step, one core, one run.

A 25.6M-parameter model (ResNet-50's parameter tensors, torchvision's
layout) gets a sparse gradient holding ``--density`` of each unit's
elements, and the dense optimizer the same gradient densified. Two index
sets: ``uniform`` (drawn uniformly: the fewest entries per cache line, the
worst case) and ``topk`` (the largest magnitudes of a real ResNet-50
gradient, one backward pass on two random 224x224 images: what the top-k
compressor selects). Two layouts: per parameter tensor (161 calls,
StellaTrain's per-parameter optimizer calls) and 25 MB buckets (hpcbench's
compressed synchroniser reduces and names gradients per bucket). Indices
are sorted per part, as the compressed allreduce's allgather delivers them.

Both sides run interleaved (dense step, sparse step, ...) on one thread
pinned to one core; the median of each and their ratio are printed, with
the load average.

    python scripts/sparse_optim_bench.py [--density 0.01] [--repeats 9] [--parts 1]

``--parts P`` splits each sparse gradient into P rank parts (a P-rank
allreduce's SparseSum, which the optimizer merges) whose union keeps the density.
"""

from __future__ import annotations

import argparse
import os
import time

import numpy as np
import torch

from hpcbench.collectives.compressed.sparse_sum import SparseSum
from hpcbench.optim import SparseAdam, SparseSGD

BUCKET_BYTES = 25 * 2 ** 20


def resnet50(seed: int):
    """ResNet-50 (torchvision) with the gradient of one backward pass on two random images."""
    from hpcbench.train.workloads.tvimport import import_torchvision

    torch.manual_seed(seed)
    model = import_torchvision().models.resnet50()
    x, y = torch.randn(2, 3, 224, 224), torch.randint(0, 1000, (2,))
    torch.nn.functional.cross_entropy(model(x), y).backward()
    return [p.grad.reshape(-1).clone() for p in model.parameters()], [tuple(p.shape) for p in model.parameters()]


def bucketed(flat_grads: list[torch.Tensor]) -> list[torch.Tensor]:
    """Consecutive parameters' gradients joined into buckets closed at ``BUCKET_BYTES`` (DDP's rule)."""
    out, cur, size = [], [], 0
    for g in flat_grads:
        cur.append(g)
        size += g.numel()
        if size * 4 >= BUCKET_BYTES:
            out.append(torch.cat(cur))
            cur, size = [], 0
    if cur:
        out.append(torch.cat(cur))
    return out


def sparse_grads(grads: list[torch.Tensor], density: float, parts: int, kind: str, seed: int) -> list[SparseSum]:
    rng = np.random.default_rng(seed)
    out = []
    for g in grads:
        n = g.numel()
        k = max(1, int(round(density * n)))
        if kind == "uniform":
            idx = rng.choice(n, k, replace=False)
            vals = rng.standard_normal(k).astype(np.float32)
        else:
            idx = torch.topk(g.abs(), k).indices.numpy()
            vals = g.numpy()[idx]
        chunks = np.array_split(rng.permutation(k), parts)
        ps = []
        for c in chunks:
            order = np.argsort(idx[c])
            ps.append((torch.from_numpy(idx[c][order].astype(np.int64)), torch.from_numpy(vals[c][order].copy())))
        out.append(SparseSum(ps, (n,), torch.float32))
    return out


def bench(label, grads, make_dense, make_sparse, a, kind):
    gen = torch.Generator().manual_seed(a.seed)
    dense_params = [torch.nn.Parameter(torch.randn(g.numel(), generator=gen)) for g in grads]
    for p, g in zip(dense_params, grads):
        p.grad = g.clone()
    sparse_params = [p.detach().clone() for p in dense_params]
    sgrads = sparse_grads(grads, a.density, a.parts, kind, a.seed)
    nnz = sum(g.nnz for g in sgrads)
    dense, sparse = make_dense(dense_params), make_sparse()

    def sparse_step():
        for i, (p, g) in enumerate(zip(sparse_params, sgrads)):
            sparse.step(f"p{i}", p, g)

    dense.step()
    sparse_step()      # warm-up: compile, allocate state
    td, ts = [], []
    for _ in range(a.repeats):
        t0 = time.perf_counter()
        dense.step()
        t1 = time.perf_counter()
        sparse_step()
        t2 = time.perf_counter()
        td.append(t1 - t0)
        ts.append(t2 - t1)
    d, s = float(np.median(td)), float(np.median(ts))
    print(f"{label:<14} {kind:<8} {len(grads):>7} {nnz:>8} {d * 1e3:>10.2f} {s * 1e3:>10.2f} {d / s:>7.1f}x",
          flush=True)
    return d / s


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--density", type=float, default=0.01)
    ap.add_argument("--repeats", type=int, default=9)
    ap.add_argument("--parts", type=int, default=1)
    ap.add_argument("--indices", default="uniform,topk", help="comma-separated: uniform, topk")
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()
    torch.set_num_threads(1)
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {sorted(os.sched_getaffinity(0))[0]})
    grads, shapes = resnet50(a.seed)
    print(f"model: ResNet-50, {sum(g.numel() for g in grads):,} float32 parameters in {len(grads)} tensors; "
          f"density {a.density:g}; {a.parts} part(s) per gradient; one thread on one core; "
          f"load {os.getloadavg()[0]:.2f}")
    print(f"{'optimizer':<14} {'indices':<8} {'tensors':>7} {'nnz':>8} {'dense(ms)':>10} {'sparse(ms)':>10} "
          f"{'ratio':>8}   (medians of {a.repeats} interleaved steps)")
    cases = [
        ("SGD+momentum", lambda ps: torch.optim.SGD(ps, lr=0.1, momentum=0.9),
         lambda: SparseSGD(lr=0.1, momentum=0.9)),
        ("Adam", lambda ps: torch.optim.Adam(ps, lr=1e-3), lambda: SparseAdam(lr=1e-3)),
    ]
    for layout, gs in (("per parameter tensor", grads), ("25 MB buckets", bucketed(grads))):
        print(f"-- {layout}")
        for kind in a.indices.split(","):
            for label, dense, sparse in cases:
                bench(label, gs, dense, sparse, a, kind)
    print(f"load at the end {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()

"""What one measurement of the compression benchmark does (local cost, recall, timed allreduce step)."""

from __future__ import annotations

import math
import statistics
import time

import numpy as np
import torch

from hpcbench.compress import build, payload_nbytes

__all__ = ["make", "gradient", "local", "torch_topk_s", "STATS", "timed_steps", "breakdown"]

def make(name: str, ratio: float, rank: int):
    """Compressor ``name`` keeping ``ratio`` of the elements where it takes a ratio, seeded by ``rank``."""
    return build(name, ratio=ratio, seed=rank)


def gradient(n: int, step: int, rank: int, seed: int) -> torch.Tensor:
    """A synthetic float32 gradient of ``n`` elements: a fixed base per rank plus per-step noise."""
    g = torch.Generator().manual_seed(seed * 7919 + rank)
    base = torch.randn(n, generator=g)
    g.manual_seed(seed * 7919 + rank + 1000 * (step + 1))
    return base.add_(torch.randn(n, generator=g), alpha=0.3)


def local(name: str, n: int, a) -> dict | None:
    """Rank 0 only: median compress/decompress time, wire bytes, recall (None for PowerSGD)."""
    c = make(name, a.ratio, 0)
    if c.kind == "lowrank":
        return None
    ct, dt, rec = [], [], []
    for step in range(a.warmup + a.repeats):
        x = gradient(n, step, 0, a.seed)
        t = time.perf_counter()
        payload, ctx = c.compress(x, "g")
        t1 = time.perf_counter()
        c.decompress(payload, ctx)
        t2 = time.perf_counter()
        if step >= a.warmup:
            ct.append(t1 - t)
            dt.append(t2 - t1)
            if c.approximates_topk and n:
                y = c.decompress(payload, ctx).view(-1)
                k = max(1, int(np.ceil(a.ratio * n)))
                ref = torch.topk(x.abs(), k).indices
                rec.append(float((y[ref] != 0).float().mean()))
    cs = statistics.median(ct)
    return {"compress_s": cs, "decompress_s": statistics.median(dt),
            "throughput_GBps": 4 * n / cs / 1e9 if cs > 0 else 0.0,
            "wire_ratio": payload_nbytes(payload) / max(1, 4 * n),
            "recall": statistics.mean(rec) if rec else float("nan")}


def torch_topk_s(n: int, a) -> float:
    """Rank 0 only: median seconds of ``torch.topk(x.abs(), k)`` (the reference selection)."""
    k = max(1, int(np.ceil(a.ratio * n)))
    ts = []
    for step in range(a.warmup + a.repeats):
        x = gradient(n, step, 0, a.seed)
        t = time.perf_counter()
        torch.topk(x.abs(), k, sorted=False)
        if step >= a.warmup:
            ts.append(time.perf_counter() - t)
    return statistics.median(ts)


#: per-step statistics of :func:`timed_steps` and how each is reduced over ranks
STATS = (("time", max), ("cpu", statistics.mean), ("encode", max), ("encode_cpu", max),
         ("decode", max), ("decode_cpu", max), ("wire", max))


def timed_steps(comm, fn, a, tr) -> dict:
    """Run ``fn(step, profile)`` warmup + repeats times, each after a sleeping barrier.

    Each step's :data:`STATS` are reduced over ranks (``time``: slowest rank's
    wall seconds), then the median over the timed repeats is taken per
    statistic. ``wire`` is the modelled busy time of the rank's outgoing link.
    """
    from hpcbench.collectives.compressed import PhaseProfile
    from hpcbench.runtime.timing import reduce_over_ranks, timed

    rows = []
    reducers = [red for _, red in STATS]
    for step in range(a.warmup + a.repeats):
        prof = PhaseProfile()
        busy = tr.modelled_busy_s
        t = timed(comm, lambda: fn(step, prof), exits=False)
        mine = (t.wall_s, t.cpu_s, prof.wall.get("encode", math.nan), prof.cpu.get("encode", math.nan),
                prof.wall.get("decode", math.nan), prof.cpu.get("decode", math.nan),
                tr.modelled_busy_s - busy)
        row = reduce_over_ranks(comm, mine, reducers)
        if step >= a.warmup:
            rows.append(row)
    return {name: statistics.median(r[i] for r in rows) for i, (name, _) in enumerate(STATS)}


def breakdown(r: dict) -> str:
    """The printed breakdown columns (ms) of a :func:`timed_steps` result."""
    def ms(v):
        return f"{1e3 * v:>8.1f}" if math.isfinite(v) else f"{'-':>8}"
    return (f"{ms(r['cpu'])}{ms(r['encode'])}{ms(r['encode_cpu'])}{ms(r['decode'])}"
            f"{ms(r['decode_cpu'])}{ms(r['wire'])}")

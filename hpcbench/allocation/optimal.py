"""``optimal``: exact contiguous min-max partition for a device order, plus an order search.

Problem (:mod:`hpcbench.allocation.instance`): split layers ``0..L-1`` into
``D`` non-empty contiguous stages, stage ``k`` on device ``o_k`` of a given
order, each within its device's memory cap, minimising the bottleneck

.. math::

    B = \\max\\Big(\\max_k s_{o_k} T[b_k, b_{k+1}),\\;
               \\max_{0<k<D} a_{b_k} \\max(c_{o_{k-1}}, c_{o_k})\\Big)

(stage compute times, and the busier link of every cut: ``a_j`` activation
bytes leaving layer ``j - 1``, ``c`` link seconds per byte). Among partitions
with the least ``B``, it returns one with the least total stage and link time
(the pipeline's fill latency), so the predicted iteration time is also lowest.

Algorithm (dynamic programming over layers x stages). Let ``F_k(e)`` be the
least bottleneck of the first ``k`` stages holding layers ``0..e-1``:

.. math::

    F_1(e) = s_{o_0} T[0, e) \\text{ if it fits } o_0\\text{'s cap, else } \\infty, \\qquad
    F_k(e) = \\min_{k-1 \\le s < e,\\ M[s, e) \\le cap_{o_{k-1}}}
             \\max\\big(F_{k-1}(s),\\ \\mathrm{cut}_{k-1}(s),\\ s_{o_{k-1}} T[s, e)\\big)

and ``B* = F_D(L)``. *Proof sketch.* The objective is a maximum of terms
each of which depends only on one stage (its range and device) or one cut
(its position and the two devices either side). Any feasible partition with
last boundary ``s`` restricts to a feasible partition of layers ``0..s-1``
over the first ``k-1`` devices, whose bottleneck is at least ``F_{k-1}(s)``
by induction; so every feasible partition's bottleneck is ``>= F_D(L)``.
Conversely, following the arg-min choices back from ``F_D(L)`` builds a
feasible partition achieving exactly ``F_D(L)``. Hence ``F_D(L)`` is the
optimum; ``F_D(L) = inf`` iff no partition fits the caps. A second pass of
the same recursion with ``+`` in place of ``max``, restricted to stages and
cuts ``<= B*``, picks the least total time among optimal partitions.
Each stage's step is an ``(L+1) x (L+1)`` array operation: ``O(D L^2)`` time,
``O(D L)`` memory for the back-pointers (160 x 64: 1.6 M cells, milliseconds).

Device order. For a free order the problem contains heterogeneous 1-D
partitioning, NP-hard in general (Pinar, Tabak and Aykanat, "One-dimensional
partitioning for heterogeneous systems", JPDC 2008). ``order="search"`` runs
the exact DP on candidate orders (given, slowest-first, fastest-first, and
by memory cap) and then a first-improvement local search over swaps of two
devices that differ (in slowdown, cap or link), comparing (bottleneck, total
time) and stopping after ``max_evals`` DP runs. The result is exact for its
order and never worse than the given order's optimum.
"""

from __future__ import annotations

import time
from typing import Literal

import numpy as np
from pydantic import Field, PositiveInt

from hpcbench.allocation.instance import Allocation, InfeasibleError, Instance
from hpcbench.runtime.config import StrategyConfig

__all__ = ["allocate", "solve_order"]

_REL_TOL = 1e-9


def _stage_tables(inst: Instance):
    n = inst.num_layers
    tsum = np.concatenate([[0.0], np.cumsum(inst.layer_time_s)])
    msum = np.concatenate([[0.0], np.cumsum(inst.layer_mem_bytes)])
    span_t = tsum[None, :] - tsum[:, None]                   # [s, e] = T[s, e)
    span_m = msum[None, :] - msum[:, None]
    upper = np.triu(np.ones((n + 1, n + 1), dtype=bool), 1)  # s < e
    out = np.concatenate([[0.0], inst.layer_out_bytes])      # out[s]: bytes crossing the cut before layer s
    return span_t, span_m, upper, out


def solve_order(inst: Instance, order, tables=None) -> tuple[float, float, np.ndarray | None]:
    """Exact optimum for one device order.

    Parameters
    ----------
    inst : Instance
    order : array_like of int, shape (D,)
        ``order[k]`` is the device of stage ``k``.

    Returns
    -------
    bottleneck_s : float
        Least bottleneck (``inf`` when no partition fits the memory caps).
    total_s : float
        Least total stage plus link time among the optimal partitions.
    bounds : numpy.ndarray of int64, shape (D+1,), or None when infeasible
    """
    order = np.asarray(order, dtype=np.int64)
    n, d = inst.num_layers, order.size
    span_t, span_m, upper, out = tables or _stage_tables(inst)
    slow, cap, spb = inst.slowdown, inst.mem_cap_bytes, inst.link_s_per_byte
    costs, cuts = [], []
    for k in range(d):
        dev = order[k]
        c = np.where(upper & (span_m <= cap[dev]), slow[dev] * span_t, np.inf)
        costs.append(c)
        if k:
            cut = out * max(spb[order[k - 1]], spb[dev])
            cut[0] = np.inf          # a stage boundary is never before layer 0
            cuts.append(cut)
    # pass 1: least bottleneck
    f = costs[0][0].copy()           # F_1(e)
    for k in range(1, d):
        g = np.maximum(f, cuts[k - 1])
        f = np.maximum(g[:, None], costs[k]).min(axis=0)
    best = float(f[n])
    if not np.isfinite(best):
        return best, np.inf, None
    limit = best * (1 + _REL_TOL) + 1e-300
    # pass 2: least total time subject to every term <= best
    back = np.empty((d, n + 1), dtype=np.int64)
    c0 = np.where(costs[0][0] <= limit, costs[0][0], np.inf)
    h = c0
    for k in range(1, d):
        cut = cuts[k - 1]
        link = np.where(cut <= limit, out * (spb[order[k - 1]] + spb[order[k]]), np.inf)
        ck = np.where(costs[k] <= limit, costs[k], np.inf)
        tot = (h + link)[:, None] + ck
        back[k] = tot.argmin(axis=0)
        h = tot[back[k], np.arange(n + 1)]
    bounds = np.empty(d + 1, dtype=np.int64)
    bounds[d] = n
    for k in range(d - 1, 0, -1):
        bounds[k] = back[k][bounds[k + 1]]
    bounds[0] = 0
    return best, float(h[n]), bounds


def _better(a, b) -> bool:
    """(bottleneck, total) of ``a`` lexicographically below ``b``'s, beyond rounding."""
    if a[0] < b[0] * (1 - _REL_TOL):
        return True
    return a[0] <= b[0] * (1 + _REL_TOL) and a[1] < b[1] * (1 - _REL_TOL)


class Config(StrategyConfig):
    """Options of ``optimal`` (the keywords of :func:`allocate`)."""

    order: Literal["given", "search"] = Field("given", description="the given device order, or a search of orders")
    max_evals: PositiveInt = Field(400, description="orders evaluated at most by the search")


def allocate(inst: Instance, order: str = "given", max_evals: int = 400) -> Allocation:
    """Exact min-max allocation (``order="given"``), or with a device-order search (``"search"``).

    Parameters
    ----------
    inst : Instance
    order : {"given", "search"}, default "given"
    max_evals : int, default 400
        Most DP runs of the order search.

    Raises
    ------
    InfeasibleError
        Fewer layers than devices, or no partition in any tried order fits the memory caps.
    ValueError
        Unknown ``order``.
    """
    if order not in ("given", "search"):
        raise ValueError(f"order must be 'given' or 'search', got {order!r}")
    inst.check_shape()
    tables = _stage_tables(inst)
    d = inst.num_devices
    cur = np.arange(d)
    res = solve_order(inst, cur, tables)
    evals = 1
    if order == "search":
        attrs = np.stack([inst.slowdown, -inst.mem_cap_bytes, inst.link_s_per_byte], axis=1)
        starts = [np.argsort(-inst.slowdown, kind="stable"), np.argsort(inst.slowdown, kind="stable"),
                  np.argsort(-inst.mem_cap_bytes, kind="stable")]
        for cand in starts:
            r = solve_order(inst, cand, tables)
            evals += 1
            if _better(r, res):
                cur, res = cand, r
        improved = True
        while improved and evals < max_evals:
            improved = False
            for i in range(d - 1):
                for j in range(i + 1, d):
                    if evals >= max_evals:
                        break
                    if np.array_equal(attrs[cur[i]], attrs[cur[j]]):
                        continue
                    cand = cur.copy()
                    cand[i], cand[j] = cand[j], cand[i]
                    r = solve_order(inst, cand, tables)
                    evals += 1
                    if _better(r, res):
                        cur, res, improved = cand, r, True
                if improved:
                    break
    if res[2] is None:
        raise InfeasibleError(f"optimal: no contiguous split of {inst.num_layers} layers over {d} devices fits "
                              f"the memory caps (largest layer {inst.layer_mem_bytes.max():.4g} B, total "
                              f"{inst.layer_mem_bytes.sum():.4g} B; caps {inst.mem_cap_bytes.min():.4g}.."
                              f"{inst.mem_cap_bytes.max():.4g} B)")
    return Allocation(cur, res[2], "optimal", info={"order_mode": order, "dp_runs": evals})

"""The per-index update loops of the sparse optimizers, compiled and as numpy.

Both forms do the same float operations in the same order, in the
parameter's dtype (no fused multiply-add: Numba does not contract without
``fastmath``), so their results are bitwise equal (tested); the numpy form
runs when the compiled loops are off (``HPCBENCH_JIT=off``). Powers ``m^k``
of the lazy decay are looked up in one table (:func:`powers`), never
computed twice in two ways.

Scalars arrive already in the parameter's dtype. ``avg`` divides the summed
gradient (a mean over ranks, as the dense synchroniser's ``flat /= size``).
Each loop first checks every index against the parameter's length and
returns the position of the first one out of range, before writing anything
(-1 when all are in range).
"""

from __future__ import annotations

import numpy as np

from hpcbench.runtime import jit

__all__ = ["powers", "sgd", "adam", "first_out_of_range"]

_compiled: dict = {}


def powers(base: float, count: int, dtype) -> np.ndarray:
    """``[base**0, base**1, ..., base**(count-1)]`` in ``dtype`` (each computed in float64, rounded once)."""
    return np.power(np.float64(base), np.arange(count, dtype=np.float64)).astype(dtype)


def first_out_of_range(idx: np.ndarray, n: int) -> int:
    """Position of the first index outside ``[0, n)``, or -1 (numpy)."""
    bad = np.flatnonzero((idx < 0) | (idx >= n))
    return int(bad[0]) if bad.size else -1


# --------------------------------------------------------------------------------------------- SGD
def _gradient_numpy(x, idx, g, avg, wd, maximize):
    """``(x[idx], g / avg, negated if maximize, + wd * x[idx])``: the loops' first steps, as numpy."""
    g = g.copy()
    if avg != 1:
        g /= avg
    if maximize:
        g = -g
    xj = x[idx]
    if wd != 0:
        g = g + wd * xj
    return xj, g


def _sgd_numpy(x, idx, g, avg, buf, last, pw, lr, momentum, one_minus_d, wd, nesterov, maximize, first,
               smart, t):
    bad = first_out_of_range(idx, x.shape[0])
    if bad >= 0:
        return bad
    xj, g = _gradient_numpy(x, idx, g, avg, wd, maximize)
    if momentum != 0:
        if first:
            b = g
        else:
            mk = pw[t - last[idx]] if smart else momentum
            b = buf[idx] * mk + one_minus_d * g
        buf[idx] = b
        g = g + momentum * b if nesterov else b
        if smart:
            last[idx] = t
    x[idx] = xj - lr * g
    return -1


def _shared(scaled, maximize, decay):
    """Compiled pieces both loops share: the range check and the gradient's first steps (options constant)."""

    def first_bad(idx, n):  # pragma: no cover - compiled
        for i in range(idx.shape[0]):
            if idx[i] < 0 or idx[i] >= n:
                return i
        return -1

    def gradient(gi, avg, wd, xj):  # pragma: no cover - compiled
        if scaled:
            gi = gi / avg
        if maximize:
            gi = -gi
        if decay:
            gi = gi + wd * xj
        return gi

    return jit.njit(first_bad), jit.njit(gradient)


def _sgd_loop(scaled, maximize, decay, momentum_on, first, smart, nesterov):
    """The SGD loop with the options as compile-time constants (dead branches compiled away)."""
    first_bad, gradient = _shared(scaled, maximize, decay)

    def loop(x, idx, g, avg, buf, last, pw, lr, momentum, one_minus_d, wd, t):  # pragma: no cover - compiled
        bad = first_bad(idx, x.shape[0])
        if bad >= 0:
            return bad
        for i in range(idx.shape[0]):
            j = idx[i]
            xj = x[j]
            gi = gradient(g[i], avg, wd, xj)
            if momentum_on:
                if first:
                    b = gi
                else:
                    if smart:
                        mk = pw[t - last[j]]
                    else:
                        mk = momentum
                    b = buf[j] * mk + one_minus_d * gi
                buf[j] = b
                if nesterov:
                    gi = gi + momentum * b
                else:
                    gi = b
                if smart:
                    last[j] = t
            x[j] = xj - lr * gi
        return -1

    return jit.njit(loop)


def sgd(compiled: bool, x, idx, g, avg, buf, last, pw, lr, momentum, one_minus_d, wd, nesterov, maximize,
        first, smart, t) -> int:
    """One SGD step on the indices ``idx`` (see :class:`hpcbench.optim.SparseSGD` for the rule).

    ``x`` (flat parameter), ``idx``, ``g`` (summed gradient values), ``avg``,
    ``buf`` (momentum buffer), ``last`` (int32 step of each index's last
    update), ``pw`` (momentum powers), ``lr``, ``momentum``,
    ``one_minus_d``, ``wd``, ``nesterov``, ``maximize``, ``first``,
    ``smart``, ``t`` (this step's number). ``compiled``: run the Numba loop
    (else numpy). Returns the position of the first index out of range
    (nothing written), or -1.
    """
    if not compiled:
        return _sgd_numpy(x, idx, g, avg, buf, last, pw, lr, momentum, one_minus_d, wd, nesterov, maximize,
                          first, smart, t)
    key = ("sgd", bool(avg != 1), bool(maximize), bool(wd != 0), bool(momentum != 0), bool(first),
           bool(smart), bool(nesterov))
    loop = _compiled.get(key)
    if loop is None:
        loop = _compiled[key] = _sgd_loop(*key[1:])
    return loop(x, idx, g, avg, buf, last, pw, lr, momentum, one_minus_d, wd, t)


# -------------------------------------------------------------------------------------------- Adam
def _lerp(m, g, w, one_minus_w):
    """torch.lerp(m, g, w) for a scalar weight: the branch on ``|w| < 0.5`` as ATen's."""
    if abs(w) < 0.5:
        return m + w * (g - m)
    return g - (g - m) * one_minus_w


def _adam_numpy(x, idx, g, avg, m_buf, v_buf, vmax, last, pw1, pw2, w1, one_minus_w1, b2, w2, step_size,
                bc2_sqrt, eps, wd, amsgrad, maximize, smart, t):
    bad = first_out_of_range(idx, x.shape[0])
    if bad >= 0:
        return bad
    xj, g = _gradient_numpy(x, idx, g, avg, wd, maximize)
    m = m_buf[idx]
    v = v_buf[idx]
    if smart:
        k = t - 1 - last[idx]
        m = m * pw1[k]
        v = v * pw2[k]
        last[idx] = t
    m = _lerp(m, g, w1, one_minus_w1)
    v = v * b2 + w2 * g * g
    m_buf[idx] = m
    v_buf[idx] = v
    if amsgrad:
        v = np.maximum(vmax[idx], v)
        vmax[idx] = v
    x[idx] = xj - step_size * (m / (np.sqrt(v) / bc2_sqrt + eps))
    return -1


def _adam_loop(scaled, maximize, decay, smart, small, amsgrad):
    """The Adam loop with the options as compile-time constants."""
    first_bad, gradient = _shared(scaled, maximize, decay)

    def loop(x, idx, g, avg, m_buf, v_buf, vmax, last, pw1, pw2, w1, one_minus_w1, b2, w2, step_size,
             bc2_sqrt, eps, wd, t):  # pragma: no cover - compiled
        bad = first_bad(idx, x.shape[0])
        if bad >= 0:
            return bad
        for i in range(idx.shape[0]):
            j = idx[i]
            xj = x[j]
            gi = gradient(g[i], avg, wd, xj)
            m = m_buf[j]
            v = v_buf[j]
            if smart:
                k = t - 1 - last[j]
                m = m * pw1[k]
                v = v * pw2[k]
                last[j] = t
            if small:
                m = m + w1 * (gi - m)
            else:
                m = gi - (gi - m) * one_minus_w1
            v = v * b2 + w2 * gi * gi
            m_buf[j] = m
            v_buf[j] = v
            if amsgrad:
                if vmax[j] > v or vmax[j] != vmax[j]:     # torch.maximum: NaN wins
                    v = vmax[j]
                vmax[j] = v
            x[j] = xj - step_size * (m / (np.sqrt(v) / bc2_sqrt + eps))
        return -1

    return jit.njit(loop)


def adam(compiled: bool, x, idx, g, avg, m_buf, v_buf, vmax, last, pw1, pw2, w1, one_minus_w1, b2, w2,
         step_size, bc2_sqrt, eps, wd, amsgrad, maximize, smart, t) -> int:
    """One Adam step on the indices ``idx`` (see :class:`hpcbench.optim.SparseAdam` for the rule).

    ``x``, ``idx``, ``g``, ``avg``, ``m_buf``, ``v_buf``, ``vmax``, ``last``,
    ``pw1``, ``pw2`` (powers of beta1 and beta2), ``w1`` (``1 - beta1``),
    ``one_minus_w1``, ``b2``, ``w2`` (``1 - beta2``), ``step_size``,
    ``bc2_sqrt``, ``eps``, ``wd``, ``amsgrad``, ``maximize``, ``smart``,
    ``t``. ``compiled`` and the return value as :func:`sgd`.
    """
    if not compiled:
        return _adam_numpy(x, idx, g, avg, m_buf, v_buf, vmax, last, pw1, pw2, w1, one_minus_w1, b2, w2,
                           step_size, bc2_sqrt, eps, wd, amsgrad, maximize, smart, t)
    key = ("adam", bool(avg != 1), bool(maximize), bool(wd != 0), bool(smart), bool(abs(w1) < 0.5),
           bool(amsgrad))
    loop = _compiled.get(key)
    if loop is None:
        loop = _compiled[key] = _adam_loop(*key[1:])
    return loop(x, idx, g, avg, m_buf, v_buf, vmax, last, pw1, pw2, w1, one_minus_w1, b2, w2, step_size,
                bc2_sqrt, eps, wd, t)

"""Exact top-k by magnitude through a sampled threshold (no full sort or partition).

``torch.topk`` on a 25M-element vector costs about half a second on one
core; selecting 1 % of it exactly needs far less work. :func:`topk_abs`
estimates a threshold ``t`` slightly *below* the k-th largest magnitude from a
small random sample, gathers every candidate ``|x| >= t`` in one pass (the
compiled scan of :mod:`hpcbench.compress._scan`, or numpy on cache-sized
chunks), then selects among the candidates alone (about ``1.16 k`` of them)
with a compiled radix select (or one ``np.partition``).

Correctness never depends on the sample. Every element with ``|x| >= t`` is a
candidate, so when at least ``k`` candidates come out the k largest among
them are the k largest overall; when fewer come out (a bad sample) the
threshold is lowered and the pass repeated, and after ``retries`` failures
the plain ``torch.topk`` runs. Cost on 25M float32 on one core (this
project's 2-core host): about 20 ms instead of about 480 ms for ``torch.topk``.

Choice of the sample rank. With ``q = k / n`` and a sample of ``m``
magnitudes drawn with replacement, ``t`` is the ``j``-th largest sample value,

.. math:: j = \\lceil q m + z \\sqrt{q (1 - q) m} \\rceil + 1 .

If the true fraction of magnitudes ``>= t`` were below ``q``, the sample
would have needed ``j`` draws from that fraction, ``z`` standard deviations
above the binomial mean: probability about ``Phi(-z)`` (3e-5 for ``z = 4``).
The expected surplus of candidates is ``z sqrt(q (1 - q) / m) n``, i.e. 16 %
of ``k`` for ``q = 0.01``, ``m = 65536``, ``z = 4``.
"""

from __future__ import annotations

import math

import numpy as np
import torch

from hpcbench.compress import _scan

__all__ = ["topk_abs", "TopKSelector"]

#: below this many elements (or for other dtypes) ``torch.topk`` is used directly
MIN_NUMEL = 1 << 16


_BITS = _scan.BITS


class TopKSelector:
    """Exact top-k by magnitude with reusable scratch buffers and a seeded sampler.

    Magnitudes are compared as integers: for IEEE floats, clearing the sign
    bit and reading the bits as a signed integer orders magnitudes exactly
    like ``|x|`` does (0 < subnormals < normals < inf), and every NaN reads
    larger than inf, so NaN counts as largest as in ``torch.topk``. No float
    ``abs`` is ever materialised.

    Parameters
    ----------
    sample_size : int, default 65536
        Sample draws ``m`` (with replacement) used to estimate the threshold.
    z : float, default 4.0
        Safety margin in binomial standard deviations (see the module docstring).
    chunk : int, default 262144
        Elements per pass chunk: the chunk, its magnitudes (1 MiB for float32)
        and its mask stay in cache between the chunk's operations, and the
        Python loop runs ~100 times for 25M elements.
    min_numel : int, default 65536
        Tensors with fewer elements go straight to ``torch.topk``.
    retries : int, default 3
        Threshold lowerings (``z -> 2 z + 1`` each time) before falling back
        to ``torch.topk``.
    seed : int, default 0
        Seed of the sampler (the selected set never depends on it).

    Attributes
    ----------
    last_candidates : int
        Candidates of the last successful pass (``>= k``), 0 if ``torch.topk`` ran.
    fallbacks : int
        How many calls ended in the plain ``torch.topk``.

    Raises
    ------
    ValueError
        On a parameter out of range.
    """

    def __init__(self, sample_size: int = 65536, z: float = 4.0, chunk: int = 1 << 18,
                 min_numel: int = MIN_NUMEL, retries: int = 3, seed: int = 0) -> None:
        if sample_size < 1 or chunk < 1 or min_numel < 0 or retries < 0:
            raise ValueError("need sample_size >= 1, chunk >= 1, min_numel >= 0, retries >= 0")
        if not (z >= 0 and math.isfinite(z)):
            raise ValueError(f"z must be finite and >= 0, got {z!r}")
        self.sample_size, self.z, self.chunk = int(sample_size), float(z), int(chunk)
        self.min_numel, self.retries = int(min_numel), int(retries)
        self._gen = torch.Generator().manual_seed(int(seed))
        self._mag: np.ndarray | None = None
        self._mask = np.empty(self.chunk, bool)
        self.last_candidates = 0
        self.fallbacks = 0

    def __call__(self, flat: torch.Tensor, k: int) -> torch.Tensor:
        """Indices of the ``k`` largest ``|flat|`` (see :meth:`select`)."""
        return self.select(flat, k)[0]

    def select(self, flat: torch.Tensor, k: int,
               add: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        """Indices and values of the ``k`` largest ``|flat|`` (of ``flat + add`` if given).

        Parameters
        ----------
        flat : torch.Tensor
            1-D CPU tensor, shape (n,), floating dtype. The fast path needs a
            contiguous float32 or float64 tensor with ``n >= min_numel`` and
            ``k <= n / 8``; anything else runs ``torch.topk(flat.abs(), k)``.
        k : int
            How many to select, ``k >= 0``; ``k >= n`` selects everything.
        add : torch.Tensor, optional
            Shape (n,), ``flat``'s dtype. ``flat += add`` is done first, in
            place (``flat`` then holds the sum, bitwise ``flat + add``), and
            the selection is over the sum. On the fast path the addition is
            fused into the candidate pass (in registers in the compiled scan,
            chunk by chunk in cache on the numpy path): error feedback's
            ``e += x`` and the selection cost one pass over memory instead
            of two.

        Returns
        -------
        indices : torch.Tensor
            int64, shape (min(k, n),), distinct: the same set as
            ``torch.topk(flat.abs(), k).indices`` up to the choice among ties
            at the k-th magnitude (the fast path keeps the first ones in
            memory order). Ascending on the fast path, torch's order otherwise.
        values : torch.Tensor
            ``flat[indices]`` (bitwise), shape (min(k, n),), ``flat``'s dtype.
        """
        n = flat.numel()
        if add is not None:
            if add.shape != flat.shape or add.dtype != flat.dtype:
                raise ValueError(f"add must have flat's shape and dtype {tuple(flat.shape)}/{flat.dtype}, "
                                 f"got {tuple(add.shape)}/{add.dtype}")
            add = add.detach().contiguous()
        fast = (flat.dtype in _BITS and flat.dim() == 1 and flat.is_contiguous()
                and n >= self.min_numel and 0 < k < n and 8 * k <= n)
        if not fast:
            if add is not None:
                flat.detach().add_(add)
            if k <= 0:
                return torch.zeros(0, dtype=torch.long), flat.new_empty(0)
            if k >= n:
                return torch.arange(n), flat.detach().reshape(-1).clone()
            return self._fallback(flat, k)
        itype, signless = _BITS[flat.dtype]
        arr = flat.detach().numpy()
        bits = arr.view(itype)
        addarr = None if add is None else add.numpy()
        q, m = k / n, self.sample_size
        pos = self._sample(n, m)
        if addarr is None:
            sample = bits[pos] & signless
        else:                       # the sum's bits at the sampled positions, before the pass
            with np.errstate(invalid="ignore", over="ignore"):
                sample = (arr[pos] + addarr[pos]).view(itype) & signless
        z = self.z
        for _ in range(self.retries + 1):
            j = math.ceil(q * m + z * math.sqrt(q * (1.0 - q) * m)) + 1
            if j > m:
                break
            t = np.partition(sample, m - j)[m - j]    # the j-th largest sampled magnitude
            if _scan.available():
                cand, raw = _scan.scan(arr, bits, signless, t, 1.25 * n * j / m + 4096, addarr)
            else:
                cand, raw = self._candidates(bits, signless, t, arr, addarr)
            addarr = None                             # applied: a retry must not add again
            if cand.shape[0] >= k:
                self.last_candidates = int(cand.shape[0])
                if _scan.available():
                    idx, raw = _scan.trim(cand, raw, signless, k)
                else:
                    idx, raw = self._trim(cand, raw, signless, k)
                return torch.from_numpy(idx), torch.from_numpy(raw.view(arr.dtype))
            z = 2.0 * z + 1.0
        if addarr is not None:
            flat.detach().add_(add)
        return self._fallback(flat, k)

    # -- pieces ------------------------------------------------------------------
    def _fallback(self, flat: torch.Tensor, k: int) -> tuple[torch.Tensor, torch.Tensor]:
        self.fallbacks += 1
        self.last_candidates = 0
        idx = torch.topk(flat.abs(), k, sorted=False).indices
        return idx, torch.index_select(flat.detach().reshape(-1), 0, idx)

    def _sample(self, n: int, m: int) -> np.ndarray:
        return torch.randint(0, n, (m,), generator=self._gen).numpy()

    def _candidates(self, bits: np.ndarray, signless, t, arr: np.ndarray | None = None,
                    addarr: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
        """Positions (ascending int64) whose magnitude bits are ``>= t``, and their raw bits.

        One pass, chunk by chunk: ``arr += addarr`` on the chunk when
        ``addarr`` is given (``arr`` is ``bits``' float view), magnitude bits
        into a scratch buffer, compare into a bool mask, ``np.flatnonzero``
        (numpy's fast boolean path, about one cycle per element;
        ``torch.nonzero`` is several times slower here), then the candidates'
        raw bits gathered from the chunk while it is still in cache (no later
        random gather over the whole tensor).
        """
        c, n = self.chunk, bits.shape[0]
        if self._mag is None or self._mag.dtype != bits.dtype:
            self._mag = np.empty(c, bits.dtype)
        pos, raw = [], []
        for s in range(0, n, c):
            xc = bits[s:s + c]
            L = xc.shape[0]
            if addarr is not None:
                fc = arr[s:s + c]
                with np.errstate(invalid="ignore", over="ignore"):   # inf - inf, overflow: IEEE results
                    np.add(fc, addarr[s:s + c], out=fc)
            mag, mk = self._mag[:L], self._mask[:L]
            np.bitwise_and(xc, signless, out=mag)
            np.greater_equal(mag, t, out=mk)
            nz = np.flatnonzero(mk)
            if nz.shape[0]:
                raw.append(xc[nz])
                pos.append(nz + s if s else nz)
        if not pos:
            return np.zeros(0, np.int64), np.zeros(0, bits.dtype)
        return np.concatenate(pos), np.concatenate(raw)

    @staticmethod
    def _trim(cand: np.ndarray, raw: np.ndarray, signless, k: int) -> tuple[np.ndarray, np.ndarray]:
        """The ``k`` largest-magnitude candidates (ascending) and their raw bits.

        One ``np.partition`` (introselect, O(count)) finds the k-th largest
        magnitude ``v``; everything above ``v`` is kept, and the first
        candidates equal to ``v`` fill up to ``k``.
        """
        count = cand.shape[0]
        if count == k:
            return cand, raw
        mag = raw & signless
        v = np.partition(mag, count - k)[count - k]
        keep = mag > v
        need = k - int(np.count_nonzero(keep))
        if need:
            keep[np.flatnonzero(mag == v)[:need]] = True
        return cand[keep], raw[keep]


def topk_abs(flat: torch.Tensor, k: int, selector: TopKSelector | None = None) -> torch.Tensor:
    """Indices (int64, shape (min(k, n),)) of the ``k`` largest ``|flat|``; see :class:`TopKSelector`."""
    return (selector or TopKSelector())(flat, k)

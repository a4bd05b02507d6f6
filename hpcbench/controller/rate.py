"""The compression rate: the least that lets one step's gradient bytes fit the estimated bandwidth.

Source: ``backend/src/engine/batch_rate_alloc_optim.py``: the bytes
(``MainOptimizer.estimate_tx_bytes``, lines 496-516), the required rate
(``calculate_goodput_mbps``, lines 519-523), the binary search
(``binary_search_min_cond``, lines 264-284: 20 halvings of ``[0, 0.999]``)
and the spread over peers (line 334: ``c = 1 - (1 - c) / (num_node - 1)``).

StellaTrain's compression rate ``c`` is the fraction of elements *dropped*
(hpcbench's compressors take the fraction kept, ``ratio = 1 - c``;
:attr:`RateDecision.ratio` gives it). Where hpcbench differs:

- the search returns the upper end of its final interval, whose bytes fit;
  StellaTrain returns the lower end, which (but when it is 0) does not fit
  by a margin of at most ``0.999 / 2**20`` in ``c``;
- a message of ``p`` bytes takes ``ceil(p / MSS)`` segments; StellaTrain
  counts ``ceil((p + MSS - 1) / MSS)`` (an integer ceiling written inside
  ``math.ceil``), one segment (66 B) more whenever ``p mod MSS >= 2``;
- the step time is ``1.5 x`` the mean over workers of the modelled backward
  time ``x_i / f_i(x_i)`` at the *new* batch sizes; StellaTrain passes the
  mean of ``f_i`` itself (samples/s, not a time) at the *current* ones (its
  helper ignores its ``batch_size`` argument), a unit slip.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np

from hpcbench.controller.throughput import ThroughputModel

__all__ = ["WireModel", "RateDecision", "search_compression_rate", "modelled_step_s", "SEARCH_STEPS",
           "MAX_RATE"]

#: StellaTrain's search: 20 halvings of [0, 0.999]
SEARCH_STEPS, MAX_RATE = 20, 0.999


@dataclass(frozen=True)
class WireModel:
    """Bytes one worker sends per step at compression rate ``c``: one message per tensor.

    A tensor of ``n`` elements keeps ``k = max(1, ceil((1 - c) n))`` pairs;
    its message is ``overhead_bytes + k (index_bytes + value_bytes)``
    (StellaTrain's ZeroMQ framing: 47 B with a 16 B tensor key), cut into
    TCP segments of ``MSS = mtu - header_bytes`` payload bytes, each
    costing ``header_bytes`` more (Ethernet, IP and TCP headers: MTU 1538 B
    on the wire, 66 B of them headers).

    Attributes
    ----------
    param_counts : tuple of int
        Elements of each tensor sent as one message (parameters or buckets).
    value_bytes : int
        4 (float32; StellaTrain 2 with ``grad_fp16``).
    index_bytes : int
        4 (int32).
    small_index_bytes : int or None
        Index bytes for tensors under 65536 elements (StellaTrain 2 with
        ``grad_idx_u16``); None: ``index_bytes``.
    overhead_bytes, mtu, header_bytes : int
        47, 1538, 66.
    """

    param_counts: tuple[int, ...]
    value_bytes: int = 4
    index_bytes: int = 4
    small_index_bytes: int | None = None
    overhead_bytes: int = 47
    mtu: int = 1538
    header_bytes: int = 66

    def kept(self, c: float) -> np.ndarray:
        """Pairs kept per tensor at rate ``c`` (``max(1, ceil((1 - c) n))``)."""
        n = np.asarray(self.param_counts, dtype=np.float64)
        return np.maximum(1, np.ceil((1.0 - c) * n)).astype(np.int64)

    def message_bytes(self, c: float) -> int:
        """Bytes on the wire for one step's messages at rate ``c``, headers included."""
        n = np.asarray(self.param_counts, dtype=np.int64)
        idx = np.full(n.shape, self.index_bytes, dtype=np.int64)
        if self.small_index_bytes is not None:
            idx[n < 65536] = self.small_index_bytes
        payload = self.overhead_bytes + self.kept(c) * (idx + self.value_bytes)
        mss = self.mtu - self.header_bytes
        segments = -(-payload // mss)
        return int(np.sum(payload + segments * self.header_bytes))

    def required_bps(self, c: float, step_s: float) -> float:
        """Bandwidth (bit/s) that sends one step's messages at rate ``c`` within ``step_s`` seconds."""
        return self.message_bytes(c) * 8.0 / step_s


@dataclass(frozen=True)
class RateDecision:
    """The chosen compression rate.

    Attributes
    ----------
    search_rate : float
        Least ``c`` (within ``MAX_RATE / 2**steps``) whose bytes fit the
        bandwidth in the step time; ``MAX_RATE`` when even that does not fit.
    compression_rate : float
        After spreading over the peers: ``1 - (1 - search_rate) / (nodes - 1)``
        (0 for one node: nothing is sent).
    fits : bool
        Whether ``search_rate``'s bytes fit.
    required_bps : float
        Bandwidth ``search_rate``'s bytes need.
    lower_rate : float
        The search's final lower end (does not fit, or 0).
    """

    search_rate: float
    compression_rate: float
    fits: bool
    required_bps: float
    lower_rate: float

    @property
    def ratio(self) -> float:
        """Fraction of elements kept (hpcbench's compressors' ``ratio``): ``1 - compression_rate``."""
        return 1.0 - self.compression_rate


def modelled_step_s(models: Sequence[ThroughputModel], batch: Sequence[int], factor: float = 1.5) -> float:
    """``factor x`` the mean over workers of ``x_i / f_i(x_i)``: the modelled forward + backward seconds."""
    return factor * float(np.mean([m.time(x) for m, x in zip(models, batch)]))


def search_compression_rate(wire: WireModel, bandwidth_bps: float, step_s: float, nodes: int,
                            steps: int = SEARCH_STEPS, high: float = MAX_RATE) -> RateDecision:
    """Binary search of the least compression rate whose step bytes fit ``bandwidth_bps``.

    ``fits(c)``: ``wire.required_bps(c, step_s) <= bandwidth_bps``
    (nonincreasing bytes in ``c``). If ``fits(0)``, 0; if not ``fits(high)``,
    ``high``; else ``steps`` halvings keep ``fits(hi)`` and not ``fits(lo)``
    and return ``hi``. Then ``c = 1 - (1 - c) / (nodes - 1)``: each node
    receives from ``nodes - 1`` peers.

    Parameters
    ----------
    wire : WireModel
    bandwidth_bps : float
        The estimated bandwidth (bit/s).
    step_s : float
        Seconds one step's compute takes (:func:`modelled_step_s`), > 0.
    nodes : int
        Workers exchanging gradients, >= 1.

    Raises
    ------
    ValueError
        ``step_s`` not positive or ``nodes < 1``.
    """
    if not step_s > 0:
        raise ValueError(f"step_s must be > 0, got {step_s!r}")
    if nodes < 1:
        raise ValueError(f"nodes must be >= 1, got {nodes!r}")

    def fits(c: float) -> bool:
        return wire.required_bps(c, step_s) <= bandwidth_bps

    lo, hi = 0.0, float(high)
    if fits(lo):
        hi = lo
    elif fits(hi):
        for _ in range(steps):
            mid = lo + (hi - lo) / 2
            if fits(mid):
                hi = mid
            else:
                lo = mid
    ok = fits(hi)
    c = 0.0 if nodes == 1 else 1.0 - (1.0 - hi) / (nodes - 1)
    return RateDecision(hi, c, ok, wire.required_bps(hi, step_s), lo)

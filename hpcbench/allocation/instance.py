"""The layer-allocation problem: an :class:`Instance` (layers, devices, links) and an :class:`Allocation`.

A model of ``L`` layers runs as a pipeline of ``D`` stages, one per device.
An allocation gives each stage a contiguous, non-empty range of layers and
a device (the device *order*). Per micro-batch:

* stage ``k`` on device ``d`` computes for ``slowdown[d] * sum(layer_time_s[range])``
  (forward and backward; the forward part is ``forward_fraction`` of it);
* the cut after layer ``j`` between stages on devices ``a`` and ``b`` carries
  ``layer_out_bytes[j]`` forward on ``a``'s outgoing link and the same number
  of gradient bytes backward on ``b``'s, each taking ``bytes * link_s_per_byte``
  of its link plus ``link_latency_s`` of delay.

Stages and links are resources a micro-batch passes through in turn, so the
steady-state time per micro-batch is the *bottleneck*: the largest stage time
or link busy time. The iteration time of a schedule is predicted by
:func:`hpcbench.allocation.simulate.simulate`.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np

from hpcbench.runtime.errors import InputError

__all__ = ["Instance", "Allocation", "InfeasibleError"]


class InfeasibleError(InputError):
    """No allocation of the layers fits the devices' memory caps (or ``L < D``)."""


def _vec(name: str, value, n: int | None, *, positive: bool = False) -> np.ndarray:
    a = np.asarray(value, dtype=np.float64).reshape(-1)
    if n is not None and a.size != n:
        raise ValueError(f"{name}: expected {n} values, got {a.size}")
    if np.any(np.isnan(a)) or np.any(a < 0) or (positive and np.any(a <= 0)):
        raise ValueError(f"{name}: values must be {'> 0' if positive else '>= 0'}, got {a.tolist()[:8]}")
    return a


@dataclasses.dataclass(frozen=True, eq=False)
class Instance:
    """Layers, devices and links of one allocation problem (struct of arrays, SI units).

    Parameters
    ----------
    layer_time_s : array_like of float, shape (L,)
        Forward plus backward time of each layer for one micro-batch on a
        reference device (slowdown 1), seconds, >= 0.
    layer_mem_bytes : array_like of float, shape (L,)
        Memory each layer needs on its device, bytes (Sky Computing:
        ``(2 * params + 2 * outputs + inputs) * 4``).
    layer_out_bytes : array_like of float, shape (L,)
        Bytes of the activation leaving each layer per micro-batch (and of
        the gradient coming back).
    slowdown : array_like of float, shape (D,)
        Per-device time multiplier, > 0 (Sky's ``device_time``; 4 for a
        device four times slower than the reference).
    mem_cap_bytes : array_like of float, shape (D,), optional
        Per-device memory cap in bytes (default unlimited).
    link_s_per_byte : array_like of float, shape (D,), optional
        Per-device outgoing-link time per byte, seconds (default 0: free links).
    link_latency_s : float, default 0.0
        Delay of every message, seconds (not a resource: links pipeline it).
    micro_batches : int, default 1
        Micro-batches per iteration ``m``.
    forward_fraction : float, default 1/3
        Share of a layer's time spent in its forward pass.
    """

    layer_time_s: np.ndarray
    layer_mem_bytes: np.ndarray
    layer_out_bytes: np.ndarray
    slowdown: np.ndarray
    mem_cap_bytes: np.ndarray | None = None
    link_s_per_byte: np.ndarray | None = None
    link_latency_s: float = 0.0
    micro_batches: int = 1
    forward_fraction: float = 1.0 / 3.0

    def __post_init__(self) -> None:
        t = _vec("layer_time_s", self.layer_time_s, None)
        if t.size == 0:
            raise ValueError("layer_time_s: need at least one layer")
        n_layers = t.size
        s = _vec("slowdown", self.slowdown, None, positive=True)
        if s.size == 0:
            raise ValueError("slowdown: need at least one device")
        n_dev = s.size
        set_ = object.__setattr__
        set_(self, "layer_time_s", t)
        set_(self, "slowdown", s)
        set_(self, "layer_mem_bytes", _vec("layer_mem_bytes", self.layer_mem_bytes, n_layers))
        set_(self, "layer_out_bytes", _vec("layer_out_bytes", self.layer_out_bytes, n_layers))
        cap = np.full(n_dev, np.inf) if self.mem_cap_bytes is None else self.mem_cap_bytes
        set_(self, "mem_cap_bytes", _vec("mem_cap_bytes", cap, n_dev))
        spb = np.zeros(n_dev) if self.link_s_per_byte is None else self.link_s_per_byte
        set_(self, "link_s_per_byte", _vec("link_s_per_byte", spb, n_dev))
        if not (self.link_latency_s >= 0 and math.isfinite(self.link_latency_s)):
            raise ValueError(f"link_latency_s: must be finite and >= 0, got {self.link_latency_s!r}")
        if int(self.micro_batches) != self.micro_batches or self.micro_batches < 1:
            raise ValueError(f"micro_batches: must be an integer >= 1, got {self.micro_batches!r}")
        if not 0.0 < self.forward_fraction < 1.0:
            raise ValueError(f"forward_fraction: must be in (0, 1), got {self.forward_fraction!r}")

    @property
    def num_layers(self) -> int:
        """``L``."""
        return int(self.layer_time_s.size)

    @property
    def num_devices(self) -> int:
        """``D`` (also the number of stages)."""
        return int(self.slowdown.size)

    def check_shape(self) -> None:
        """Raise :class:`InfeasibleError` if there are fewer layers than devices."""
        if self.num_layers < self.num_devices:
            raise InfeasibleError(f"{self.num_layers} layers cannot fill {self.num_devices} pipeline stages "
                                  f"(every stage needs at least one layer)")

    def cut_time_s(self, boundary: int, dev_a: int, dev_b: int) -> float:
        """Busiest link time per micro-batch of the cut before layer ``boundary`` (between devices a, b)."""
        nbytes = self.layer_out_bytes[boundary - 1]
        return float(nbytes * max(self.link_s_per_byte[dev_a], self.link_s_per_byte[dev_b]))

    def stage_times_s(self, alloc: "Allocation") -> np.ndarray:
        """Compute time per micro-batch of each stage, shape (D,), seconds."""
        csum = np.concatenate([[0.0], np.cumsum(self.layer_time_s)])
        b = alloc.bounds
        return self.slowdown[alloc.order] * (csum[b[1:]] - csum[b[:-1]])

    def stage_mem_bytes(self, alloc: "Allocation") -> np.ndarray:
        """Memory of each stage's layers, shape (D,), bytes."""
        msum = np.concatenate([[0.0], np.cumsum(self.layer_mem_bytes)])
        return msum[alloc.bounds[1:]] - msum[alloc.bounds[:-1]]

    def link_times_s(self, alloc: "Allocation") -> tuple[np.ndarray, np.ndarray]:
        """Forward and backward link busy time per micro-batch of each cut, two arrays of shape (D-1,)."""
        nbytes = self.layer_out_bytes[alloc.bounds[1:-1] - 1]
        fwd = nbytes * self.link_s_per_byte[alloc.order[:-1]]
        bwd = nbytes * self.link_s_per_byte[alloc.order[1:]]
        return fwd, bwd

    def bottleneck_s(self, alloc: "Allocation") -> float:
        """Largest stage or link time per micro-batch (the objective every allocator minimises), seconds."""
        fwd, bwd = self.link_times_s(alloc)
        return float(max(self.stage_times_s(alloc).max(), fwd.max(initial=0.0), bwd.max(initial=0.0)))

    def validate(self, alloc: "Allocation") -> None:
        """Check an allocation against this instance.

        Raises
        ------
        ValueError
            Wrong shape, a device used twice, or bounds not strictly increasing from 0 to L.
        InfeasibleError
            A stage exceeds its device's memory cap.
        """
        if alloc.order.size != self.num_devices or alloc.bounds.size != self.num_devices + 1:
            raise ValueError(f"allocation has {alloc.order.size} stages, instance has {self.num_devices} devices")
        if sorted(alloc.order.tolist()) != list(range(self.num_devices)):
            raise ValueError(f"order must be a permutation of the devices, got {alloc.order.tolist()}")
        b = alloc.bounds
        if b[0] != 0 or b[-1] != self.num_layers or np.any(np.diff(b) < 1):
            raise ValueError(f"bounds must rise strictly from 0 to {self.num_layers}, got {b.tolist()}")
        mem = self.stage_mem_bytes(alloc)
        over = np.nonzero(mem > self.mem_cap_bytes[alloc.order])[0]
        if over.size:
            k = int(over[0])
            raise InfeasibleError(f"stage {k} (layers {b[k]}..{b[k + 1] - 1}) needs {mem[k]:.4g} B on device "
                                  f"{alloc.order[k]}, whose cap is {self.mem_cap_bytes[alloc.order[k]]:.4g} B")

    def with_slowdown(self, slowdown) -> "Instance":
        """The same instance with other device slowdowns."""
        return dataclasses.replace(self, slowdown=np.asarray(slowdown, dtype=np.float64))


@dataclasses.dataclass(eq=False)
class Allocation:
    """Which layers each pipeline stage holds, and on which device.

    Attributes
    ----------
    order : numpy.ndarray of int64, shape (D,)
        ``order[k]`` is the device running stage ``k``.
    bounds : numpy.ndarray of int64, shape (D + 1,)
        Stage ``k`` holds layers ``bounds[k] .. bounds[k + 1] - 1``.
    method : str
        The allocator's registry name.
    solve_s : float
        Wall time the allocator took, seconds.
    bottleneck_s, predicted_iteration_s : float
        Filled in by :func:`hpcbench.allocation.allocate` (NaN until then).
    info : dict
        Allocator-specific notes (solver status, MILP objective and gap...).
    """

    order: np.ndarray
    bounds: np.ndarray
    method: str = ""
    solve_s: float = 0.0
    bottleneck_s: float = math.nan
    predicted_iteration_s: float = math.nan
    info: dict = dataclasses.field(default_factory=dict)

    def __post_init__(self) -> None:
        self.order = np.asarray(self.order, dtype=np.int64).reshape(-1)
        self.bounds = np.asarray(self.bounds, dtype=np.int64).reshape(-1)

    @property
    def layers_per_stage(self) -> np.ndarray:
        """Number of layers of each stage, shape (D,)."""
        return np.diff(self.bounds)

    def __repr__(self) -> str:
        return (f"Allocation({self.method!r}, layers={self.layers_per_stage.tolist()}, "
                f"order={self.order.tolist()}, bottleneck_s={self.bottleneck_s:.4g})")

"""Profile the pipeline layers and the links: the inputs of the allocation problem.

* per layer: forward and backward time for one micro-batch (median of
  ``reps`` runs after one warm-up), parameter bytes, output bytes, and Sky
  Computing's memory estimate ``(2 * params + 2 * outputs + inputs) * 4`` B
  (``scaelum/dynamics/benchmarker.py``: parameters and their gradients,
  outputs and their gradients, inputs; float32);
* per link: time per byte, from a ping-pong of one activation between each
  pair of neighbouring ranks over the transports the run uses.
"""

from __future__ import annotations

import dataclasses
import time

import numpy as np
import torch

from hpcbench.pipeline.model import synthetic_batch

__all__ = ["LayerProfile", "profile_layers", "profile_links"]


@dataclasses.dataclass
class LayerProfile:
    """Per-layer measurements, arrays of shape (L,).

    Attributes
    ----------
    forward_s, backward_s : numpy.ndarray of float64
        Seconds per micro-batch on the profiling rank.
    param_bytes, out_bytes, mem_bytes : numpy.ndarray of float64
        Parameter bytes, output activation bytes per micro-batch, Sky's memory estimate.
    """

    forward_s: np.ndarray
    backward_s: np.ndarray
    param_bytes: np.ndarray
    out_bytes: np.ndarray
    mem_bytes: np.ndarray

    @property
    def time_s(self) -> np.ndarray:
        """Forward plus backward seconds per layer."""
        return self.forward_s + self.backward_s

    @property
    def forward_fraction(self) -> float:
        """Share of the model's time spent forward."""
        return float(self.forward_s.sum() / self.time_s.sum())


def profile_layers(layers, model_cfg, micro_batch: int, seed: int, reps: int = 5, device=None) -> LayerProfile:
    """Time every layer's forward and backward on one micro-batch (this process, one thread).

    Parameters
    ----------
    layers : list of torch.nn.Module
        All pipeline layers, in order (moved to ``device``).
    model_cfg : ModelConfig
    micro_batch : int
    seed : int
    reps : int, default 5
    device : hpcbench.runtime.device.Device, optional
        Where to run them (default: the CPU). On a GPU each forward and
        backward is timed by CUDA events around it, read after the device has
        passed them (:class:`hpcbench.runtime.devicetime.DeviceClock`).

    Returns
    -------
    LayerProfile
    """
    from hpcbench.runtime.devicetime import DeviceClock

    clock = DeviceClock(device)
    dev = "cpu" if device is None else device.torch
    ids, _ = synthetic_batch(model_cfg, micro_batch, seed, 0)
    x = ids.to(dev)
    n = len(layers)
    fwd, bwd = np.zeros(n), np.zeros(n)
    params, outs, mems = np.zeros(n), np.zeros(n), np.zeros(n)
    for j, layer in enumerate(layers):
        layer.to(dev)
        inp = x if j == 0 else x.detach().requires_grad_(True)
        tf, tb = [], []
        for _ in range(reps + 1):
            t0 = clock.mark()
            out = layer(inp)
            t1 = clock.mark()
            out.backward(torch.ones_like(out))
            t2 = clock.mark()
            tf.append(clock.seconds(t0, t1))
            tb.append(clock.seconds(t1, t2))
        layer.zero_grad(set_to_none=True)
        fwd[j], bwd[j] = np.median(tf[1:]), np.median(tb[1:])
        params[j] = sum(p.numel() for p in layer.parameters()) * 4.0
        outs[j] = out.numel() * 4.0
        in_bytes = inp.numel() * inp.element_size()
        mems[j] = 2 * params[j] + 2 * outs[j] + in_bytes
        x = out.detach()
    return LayerProfile(fwd, bwd, params, outs, mems)


def profile_links(comm, fwd, nbytes: int, reps: int = 3) -> np.ndarray:
    """Seconds per byte of each rank's forward link (ping-pong of ``nbytes`` with the next rank).

    Collective over ``comm``. Rank ``k`` sends ``nbytes`` to ``k + 1`` on
    ``fwd`` and gets a 1-byte reply over plain MPI; the one-way time is that
    round trip minus half the round trip of a 1-byte exchange (the reply's
    share). Pairs ``(k, k + 1)`` with even ``k`` go first, then odd ``k``.
    The per-byte figure includes the message latency.

    Returns
    -------
    numpy.ndarray of float64, shape (comm.size,)
        On every rank; the last rank's entry repeats the previous one (it sends
        no activations).
    """
    from hpcbench.runtime.wait import sleep_barrier

    p, k = comm.size, comm.rank
    buf = np.zeros(max(nbytes, 1) // 4 + 1, np.float32)
    one = np.zeros(1, np.uint8)
    spb = 0.0
    for parity in (0, 1):
        sleep_barrier(comm)
        if k % 2 == parity and k + 1 < p:
            times = []
            for _ in range(reps):
                t0 = time.monotonic()
                fwd.isend(buf, k + 1, 7).wait()
                comm.Recv(one, source=k + 1, tag=8)
                t1 = time.monotonic()
                comm.Send(one, dest=k + 1, tag=9)
                comm.Recv(one, source=k + 1, tag=10)
                t2 = time.monotonic()
                times.append(max((t1 - t0) - 0.5 * (t2 - t1), 0.0))
            spb = float(np.median(times)) / buf.nbytes
        elif k % 2 != parity and k >= 1 and (k - 1) % 2 == parity:
            for _ in range(reps):
                fwd.irecv(buf, k - 1, 7).wait()
                comm.Send(one, dest=k - 1, tag=8)
                comm.Recv(one, source=k - 1, tag=9)
                comm.Send(one, dest=k - 1, tag=10)
    out = np.array(comm.allgather(spb))
    if p > 1:
        out[-1] = out[-2]
    return out

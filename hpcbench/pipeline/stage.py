"""One pipeline stage on one rank: runs a schedule's actions, sends activations forward and gradients back.

Activations go to rank ``k + 1`` on the *forward* transport and gradients to
rank ``k - 1`` on the *backward* transport (two transports, so that each
direction is its own modelled link, as in :mod:`hpcbench.allocation.simulate`).
Every receive of an iteration is posted when it starts; sends are
nonblocking and completed at the end of the iteration. Waiting sleeps.

``compute="real"`` runs the stage's layers (autograd across the stage) and
then sleeps ``(slowdown - 1)`` times the measured compute time, stretching it
to a slower device's. On a GPU (``device``) the layers live on the stage's
GPU; activations and gradients are copied to host memory to be sent over MPI
and copied to the device when received (host staging), and every time is
read after synchronising the device. ``compute="emulated"`` (Sky Computing's method) runs
nothing: it sleeps the profiled time of its layers times the slowdown
(dilated) and sends buffers of the real activation size.
"""

from __future__ import annotations

import time

import numpy as np
import torch
from torch import nn

from hpcbench.allocation import SCHEDULES
from hpcbench.pipeline.model import activation_shape
from hpcbench.runtime.devicetime import DeviceClock
from hpcbench.runtime.dilation import NO_DILATION, TimeDilation

__all__ = ["Stage", "IterationRecord"]


class IterationRecord:
    """Timing of one iteration on one rank (modelled seconds from the iteration's start).

    Attributes
    ----------
    actions : list of (str, int, float, float, float)
        ``(kind, micro_batch, ready_s, start_s, end_s)``: input awaited from
        ``ready_s`` (the wait ends at ``start_s``), compute ends at ``end_s``.
    sends : list of (str, int, float, float)
        ``(kind, micro_batch, posted_s, done_s)`` of each send (``F``: an
        activation forward, ``B``: a gradient back): posted when the compute
        ended; done at the modelled time the link is free again on a
        modelled link, else when the stage first saw it complete (polled
        after every action, then waited for at the end).
    start_s : float
        The iteration's start on the dilation's clock (modelled seconds).
    duration_s : float
        From the start to the completion of this rank's last send.
    loss : float
        Mean loss over the micro-batches (last stage, real compute), else NaN.
    """

    __slots__ = ("actions", "sends", "start_s", "duration_s", "loss")

    def __init__(self) -> None:
        self.actions: list = []
        self.sends: list = []
        self.start_s = 0.0
        self.duration_s = 0.0
        self.loss = float("nan")

    def busy_s(self) -> float:
        """Compute time of the iteration."""
        return float(sum(a[4] - a[3] for a in self.actions))


class Stage:
    """The layers ``first .. last - 1`` of the model on rank ``stage`` of ``num_stages``.

    Parameters
    ----------
    model_cfg : hpcbench.pipeline.config.ModelConfig
    layers : list of torch.nn.Module or None
        This stage's layers (real compute); None when emulated.
    first, last : int
        Pipeline-layer range ``[first, last)`` of the stage.
    stage, num_stages : int
    micro_batch : int
        Samples per micro-batch.
    fwd, bwd : hpcbench.collectives.transport.Transport
        Transports towards the next and the previous stage.
    compute : {"real", "emulated"}
    slowdown : float
        Device slowdown factor (>= 1 stretches; < 1 is taken as 1 in real mode).
    layer_time_s : numpy.ndarray, shape (L,), optional
        Profiled forward+backward seconds per layer (emulated mode).
    forward_fraction : float
        Share of ``layer_time_s`` spent forward (emulated mode).
    dilation : TimeDilation
    device : hpcbench.runtime.device.Device, optional
        The stage's device (default: the CPU); its layers are moved there.
    """

    def __init__(self, model_cfg, layers, first: int, last: int, stage: int, num_stages: int,
                 micro_batch: int, fwd, bwd, compute: str = "real", slowdown: float = 1.0,
                 layer_time_s: np.ndarray | None = None, forward_fraction: float = 1 / 3,
                 dilation: TimeDilation = NO_DILATION, device=None) -> None:
        from hpcbench.runtime.device import CPU

        self.cfg = model_cfg
        self.device = device if device is not None else CPU
        self.module = nn.Sequential(*layers).to(self.device.torch) if layers is not None else None
        self._clock = DeviceClock(self.device)
        self.first, self.last = first, last
        self.stage, self.num_stages = stage, num_stages
        self.micro_batch = micro_batch
        self.fwd, self.bwd = fwd, bwd
        self.compute = compute
        self.slowdown = float(slowdown)
        self.dilation = dilation
        if compute == "emulated":
            t = float(np.sum(layer_time_s[first:last]))
            self._emulated = (t * forward_fraction, t * (1.0 - forward_fraction))
        self.in_shape = activation_shape(model_cfg, first - 1, micro_batch) if first > 0 else None
        self.out_shape = activation_shape(model_cfg, last - 1, micro_batch)

    @property
    def is_first(self) -> bool:
        return self.stage == 0

    @property
    def is_last(self) -> bool:
        return self.stage == self.num_stages - 1

    def _stretch(self, t0: float) -> None:
        """Real compute: sleep so that the compute since ``t0`` (:meth:`DeviceClock.now`) lasts ``slowdown`` times
        as long."""
        if self.slowdown > 1.0:
            time.sleep((self.slowdown - 1.0) * (self._clock.now() - t0))

    def run_iteration(self, ids: torch.Tensor | None, labels: torch.Tensor | None, m: int,
                      schedule: str) -> IterationRecord:
        """Run one iteration (``m`` micro-batches) of ``schedule``; every stage calls it together.

        Parameters
        ----------
        ids : torch.Tensor of int64, shape (m * micro_batch, seq_len), or None
            Token ids (first stage, real compute).
        labels : torch.Tensor of int64, shape (m * micro_batch,), or None
            Labels (last stage, real compute).

        Returns
        -------
        IterationRecord
            Gradients are left accumulated in the stage's parameters (the caller steps).
        """
        rec = IterationRecord()
        now = DeviceClock(self.device, self.dilation.now).now if self.device.is_cuda else self.dilation.now
        real = self.compute == "real"
        dev = self.device.torch
        if real and self.device.is_cuda:
            ids = ids.to(dev) if ids is not None else None
            labels = labels.to(dev) if labels is not None else None
        recv_f, recv_b, sends = {}, {}, []
        inbufs, gradbufs = {}, {}
        for i in range(m):
            if not self.is_first:
                inbufs[i] = np.empty(self.in_shape, dtype=np.float32)
                recv_f[i] = self.fwd.irecv(inbufs[i], self.stage - 1, i)
            if not self.is_last:
                gradbufs[i] = np.empty(self.out_shape, dtype=np.float32)
                recv_b[i] = self.bwd.irecv(gradbufs[i], self.stage + 1, i)
        saved: dict[int, tuple] = {}
        losses = []
        mb = self.micro_batch
        t_start = rec.start_s = now()
        pending: list = []                    # (kind, micro-batch, posted, request) of sends not seen done
        to_perf = time.monotonic() - time.perf_counter()     # a modelled link stamps time.monotonic()

        def done(item, seen: float) -> None:
            ready = getattr(item[3], "ready_at", None)
            if ready is not None:
                seen = min(seen, self.dilation.to_model(ready - to_perf) - t_start)
            rec.sends.append((item[0], item[1], item[2], max(item[2], seen)))

        def poll():
            t = now() - t_start
            for item in [p for p in pending if p[3].test()]:
                pending.remove(item)
                done(item, t)

        for kind, i in SCHEDULES[schedule](self.stage, self.num_stages, m):
            ready = now() - t_start
            if kind == "F":
                if not self.is_first:
                    recv_f[i].wait()
                start = now() - t_start
                if real:
                    t0 = self._clock.now()
                    if self.is_first:
                        x = ids[i * mb:(i + 1) * mb]
                    else:
                        x = torch.from_numpy(inbufs[i]).to(dev).requires_grad_(True)
                    out = self.module(x)
                    if self.is_last:
                        loss = nn.functional.cross_entropy(out, labels[i * mb:(i + 1) * mb]) / m
                        losses.append(loss.item())
                        out = loss
                    saved[i] = (x, out)
                    self._stretch(t0)
                    payload = None if self.is_last else np.ascontiguousarray(out.detach().cpu().numpy())
                else:
                    self.dilation.sleep(self._emulated[0] * self.slowdown)
                    payload = None if self.is_last else np.zeros(self.out_shape, np.float32)
                end = now() - t_start
                if payload is not None:
                    sends.append((self.fwd.isend(payload, self.stage + 1, i), payload))
                    pending.append(("F", i, end, sends[-1][0]))
            else:
                if not self.is_last:
                    recv_b[i].wait()
                start = now() - t_start
                if real:
                    t0 = self._clock.now()
                    x, out = saved.pop(i)
                    if self.is_last:
                        out.backward()
                    else:
                        out.backward(torch.from_numpy(gradbufs[i]).to(dev))
                    self._stretch(t0)
                    payload = None if self.is_first else np.ascontiguousarray(x.grad.cpu().numpy())
                else:
                    self.dilation.sleep(self._emulated[1] * self.slowdown)
                    payload = None if self.is_first else inbufs[i]
                end = now() - t_start
                if payload is not None:
                    sends.append((self.bwd.isend(payload, self.stage - 1, i), payload))
                    pending.append(("B", i, end, sends[-1][0]))
            rec.actions.append((kind, i, ready, start, end))
            poll()
        for item in pending:
            item[3].wait()
            done(item, now() - t_start)
        for req, _ in sends:
            req.wait()
        rec.duration_s = now() - t_start
        if losses:
            rec.loss = float(sum(losses))
        return rec

"""Profile one worker's compute once: forward, backward and optimizer time, when each gradient is ready,
and when forward first needs each parameter.

The emulated mode (``compute: emulated``) replays this profile instead of
running the model: it waits the forward time, then releases each gradient
bucket at the moment backward would have produced it, then waits the rest of
backward and the optimizer step. Under ``schedule: priority`` the forward is
replayed in pieces, each starting when the next bucket's parameters are
first needed (:attr:`ComputeProfile.param_need_s`).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:   # a ComputeProfile reaches every rank (pickled); only profile_compute needs torch
    import torch

__all__ = ["ComputeProfile", "profile_compute", "load_profile", "parameter_owners"]


@dataclass(frozen=True)
class ComputeProfile:
    """One training step's compute on one worker, in seconds (modelled, undilated).

    Attributes
    ----------
    forward_s, backward_s, optimizer_s : float
        Forward (with the loss), backward, and SGD step times.
    param_ready_s : numpy.ndarray of float64, shape (n_params,)
        When each parameter's gradient is accumulated, from the start of
        backward (registration order).
    numels : tuple of int
        Elements of each parameter (registration order).
    source : str
        ``"measured"`` or ``"given"`` (scaled to a configured compute time).
    param_need_s : numpy.ndarray of float64, shape (n_params,), optional
        When forward first uses each parameter, from the start of forward
        (the forward pre-hook of the module that owns it); empty when not
        profiled (older result files), in which case
        :meth:`need_times` assumes registration order at even spacing.
    device : str
        What computed the profile: ``"cpu"``, or the GPU's name (``"NVIDIA
        H100 80GB HBM3"``); ``""`` when unknown (older files, given times).
    copy_s, scale_s, axpy_s : float
        One pass over the whole model as a flat float32 vector on the
        profiling device, warm buffers: ``y.copy_(x)``, ``y.mul_(c)`` and
        ``y.add_(x, alpha=c)``. A model-averaging synchroniser's memory work
        outside its allreduce is made of these (copying the model into the
        send buffer, mixing the result in), and the emulated worker replays it
        (:meth:`hpcbench.sync.base.Synchroniser.mix_memory_s`). 0 when
        not profiled (older files, ``whatif``). :meth:`at_batch` keeps
        them (the model's size does not change with the batch);
        :meth:`scaled_to` scales them with the compute: a given compute time
        stands for another device (figure 9's V100), assumed as much faster
        at copying as at computing (102 MB copied in 21 ms on one core of the
        development machine would otherwise weigh on a 0.174 s V100 step).
    """

    forward_s: float
    backward_s: float
    optimizer_s: float
    param_ready_s: np.ndarray
    numels: tuple
    source: str = "measured"
    param_need_s: np.ndarray = field(default_factory=lambda: np.zeros(0))
    device: str = ""
    copy_s: float = 0.0
    scale_s: float = 0.0
    axpy_s: float = 0.0

    def need_times(self) -> np.ndarray:
        """:attr:`param_need_s`, or (not profiled) ``forward_s * i / n`` for parameter ``i`` of ``n``."""
        n = len(self.numels)
        if len(self.param_need_s) == n:
            return np.asarray(self.param_need_s, dtype=np.float64)
        return self.forward_s * np.arange(n, dtype=np.float64) / max(n, 1)

    @property
    def compute_s(self) -> float:
        """Forward + backward + optimizer."""
        return self.forward_s + self.backward_s + self.optimizer_s

    def scaled_to(self, compute_s: float) -> "ComputeProfile":
        """The same shares, gradient timeline and memory passes, stretched to a step of ``compute_s`` seconds."""
        k = compute_s / self.compute_s
        return replace(self, forward_s=self.forward_s * k, backward_s=self.backward_s * k,
                       optimizer_s=self.optimizer_s * k, param_ready_s=self.param_ready_s * k, source="given",
                       param_need_s=self.param_need_s * k, copy_s=self.copy_s * k, scale_s=self.scale_s * k,
                       axpy_s=self.axpy_s * k)


    def slowed(self, factor: float) -> "ComputeProfile":
        """This profile on a device ``factor`` times slower: every time (forward, backward, optimizer, the
        gradients' ready and need times, the model's memory passes) times ``factor`` (a per-rank speed factor,
        :mod:`hpcbench.traces.speed`)."""
        return replace(self, forward_s=self.forward_s * factor, backward_s=self.backward_s * factor,
                       optimizer_s=self.optimizer_s * factor, param_ready_s=self.param_ready_s * factor,
                       param_need_s=self.param_need_s * factor, device="", copy_s=self.copy_s * factor,
                       scale_s=self.scale_s * factor, axpy_s=self.axpy_s * factor)

    def at_batch(self, factor: float) -> "ComputeProfile":
        """This step at ``factor`` times the profiled batch: forward and backward (and the gradients' ready and
        need times) stretched by ``factor``, the optimizer step unchanged (it touches every parameter once
        whatever the batch). A linear model of compute-bound layers: a small batch that leaves an accelerator
        idle is slower per sample than this predicts. ``factor`` 1 returns this profile itself.
        """
        if factor == 1.0:
            return self
        return replace(self, forward_s=self.forward_s * factor, backward_s=self.backward_s * factor,
                       param_ready_s=self.param_ready_s * factor, param_need_s=self.param_need_s * factor)


def parameter_owners(model: torch.nn.Module, params) -> list:
    """``(module, indices)`` of every module of ``model`` that directly owns some of ``params``.

    ``indices`` index ``params`` (a list of the model's parameters); a forward
    pre-hook on each such module runs just before those parameters are first used.
    """
    index = {id(p): i for i, p in enumerate(params)}
    out = []
    for mod in model.modules():
        ids = [index[id(p)] for p in mod.parameters(recurse=False) if id(p) in index]
        if ids:
            out.append((mod, ids))
    return out


def profile_compute(model: torch.nn.Module, batches, steps: int = 3, lr: float = 0.01, clock=None) -> ComputeProfile:
    """Time ``steps`` local SGD steps of ``model`` on ``batches`` (after one warm-up); medians.

    Parameters
    ----------
    model : torch.nn.Module
        Trained in place (a copy is the caller's business), on the device of
        ``clock`` (the batches too).
    batches : callable
        ``batches(step) -> (x, y)``, the inputs and labels of step ``step``.
    steps : int
        Measured steps (>= 1).
    lr : float
        SGD learning rate.
    clock : hpcbench.runtime.devicetime.DeviceClock, optional
        How the device is timed (default: the host clock, CPU). Every time is
        a mark taken in the stream (a CUDA event on a GPU, recorded by the
        hooks without synchronising, so backward is not stalled), turned into
        seconds once the step is over.

    Returns
    -------
    ComputeProfile
        With ``param_need_s`` from forward pre-hooks on every module that
        owns parameters (a parameter never used in forward gets ``forward_s``),
        ``device`` naming the CPU or GPU, and the model's memory passes
        (``copy_s``, ``scale_s``, ``axpy_s``) timed on the same device.
    """
    import torch

    from hpcbench.runtime.devicetime import HOST

    clock = HOST if clock is None else clock
    params = [p for p in model.parameters() if p.requires_grad]
    n = len(params)
    ready: list = [None] * n
    need: list = [None] * n
    hooks = [p.register_post_accumulate_grad_hook(lambda p, i=i: ready.__setitem__(i, clock.mark()))
             for i, p in enumerate(params)]

    def first_use(ids):
        def hook(module, args):
            mark = clock.mark()
            for i in ids:
                if need[i] is None:
                    need[i] = mark
        return hook

    for mod, ids in parameter_owners(model, params):
        hooks.append(mod.register_forward_pre_hook(first_use(ids)))
    opt = torch.optim.SGD(params, lr=lr)
    rows, readies, needs = [], [], []
    try:
        for s in range(steps + 1):
            x, y = batches(s)
            need[:] = [None] * n
            ready[:] = [None] * n
            clock.synchronize()
            t0 = clock.mark()
            loss = torch.nn.functional.cross_entropy(model(x), y)
            t1 = clock.mark()
            loss.backward()
            t2 = clock.mark()
            opt.step()
            opt.zero_grad(set_to_none=False)    # as the worker: gradients kept and zeroed (GradientBuckets.zero)
            t3 = clock.mark()
            f, b, o = clock.seconds(t0, t1), clock.seconds(t1, t2), clock.seconds(t2, t3)
            if s:
                rows.append((f, b, o))
                readies.append([clock.seconds(t1, r) if r is not None else 0.0 for r in ready])
                needs.append([clock.seconds(t0, m) if m is not None else f for m in need])
    finally:
        for h in hooks:
            h.remove()
    f, b, o = np.median(np.array(rows), axis=0)
    passes = _model_passes(params, steps, clock)
    return ComputeProfile(float(f), float(b), float(o), np.median(np.array(readies), axis=0),
                          tuple(p.numel() for p in params), "measured", np.median(np.array(needs), axis=0),
                          _device_name(clock.device), *passes)


def _model_passes(params, steps: int, clock) -> tuple:
    """Medians over ``steps`` (after one warm-up) of one ``copy_``, ``mul_`` and ``add_(alpha=)`` pass over
    the model flattened (``copy_s``, ``scale_s``, ``axpy_s`` of :class:`ComputeProfile`)."""
    import torch

    with torch.no_grad():
        x = torch.nn.utils.parameters_to_vector(params).detach()
        y = x.clone()
        ops = (lambda: y.copy_(x), lambda: y.mul_(0.5), lambda: y.add_(x, alpha=0.5))
        rows = []
        for s in range(steps + 1):
            clock.synchronize()
            marks = [clock.mark()]
            for op in ops:
                op()
                marks.append(clock.mark())
            if s:
                rows.append([clock.seconds(a, b) for a, b in zip(marks, marks[1:])])
    return tuple(float(v) for v in np.median(np.array(rows), axis=0))


def _device_name(device) -> str:
    """``"cpu"`` or the GPU's name."""
    if device is None or not device.is_cuda:
        return "cpu"
    import torch

    return str(torch.cuda.get_device_name(device.index))


def load_profile(path, model: str) -> ComputeProfile:
    """The profile a training result file replayed (``profile`` table and root attributes), to replay it again.

    A sweep that loads one profile (``profile_file:``) gives every worker count
    the same compute timeline, so its measurements and alpha-beta predictions
    differ only by the communication, not by each run's own profiling noise.

    Parameters
    ----------
    path : str or pathlib.Path
        An hpcbench ``train`` result file written with the ``profile`` table.
    model : str
        The job's model: it must be the file's.

    Returns
    -------
    ComputeProfile
        ``source`` ``"file"``.

    Raises
    ------
    OSError
        The file cannot be read.
    KeyError, ValueError
        It is not a training result with a profile of ``model``.
    """
    from hpcbench.results import read_attrs, read_table

    attrs = read_attrs(path)
    if attrs.get("kind") != "train":
        raise ValueError(f"kind {attrs.get('kind')!r}, expected 'train'")
    if attrs.get("model") != model:
        raise ValueError(f"profiles model {attrs.get('model')!r}, the job trains {model!r}")
    t = read_table(path, "profile")
    if not len(t["numel"]):
        raise ValueError("its profile table is empty")
    return ComputeProfile(float(attrs["forward_s"]), float(attrs["backward_s"]), float(attrs["optimizer_s"]),
                          np.asarray(t["ready_s"], dtype=np.float64), tuple(int(n) for n in t["numel"]), "file",
                          np.asarray(t["need_s"], dtype=np.float64), str(attrs.get("profile_device", "")),
                          *(float(attrs.get(k, 0.0)) for k in ("model_copy_s", "model_scale_s", "model_axpy_s")))

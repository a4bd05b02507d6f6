"""Client-side local training and server-side evaluation (pure torch, no MPI).

:class:`LocalResult` and :func:`decayed_learning_rate` live in the torch-free
:mod:`hpcbench.fl.training_result` (the numpy engine uses them too) and are
re-exported here.
"""

from __future__ import annotations

import math
import time

import numpy as np
import torch

from hpcbench.fl.data.base import ClientShard
from hpcbench.fl.models import load_flat_parameters
from hpcbench.fl.training_result import LocalResult, decayed_learning_rate

__all__ = ["LocalResult", "train_client", "local_loss", "evaluate", "client_generator", "decayed_learning_rate"]


@torch.no_grad()
def local_loss(model: torch.nn.Module, global_flat: torch.Tensor, shard: ClientShard,
               batch_size: int = 512) -> float:
    """Mean per-example loss of ``global_flat`` over all of ``shard``'s local examples (``F_k(w)``)."""
    load_flat_parameters(model, global_flat)
    model.eval()
    dev = _device_of(model)
    total = 0.0
    for lo in range(0, shard.num_examples, batch_size):
        x, y = shard.batch(torch.arange(lo, min(lo + batch_size, shard.num_examples)))
        x, y = x.to(dev), y.to(dev)
        total += float(model.sample_losses(model(x), y).double().sum())
    return total / shard.num_examples


def _device_of(model: torch.nn.Module) -> torch.device:
    """The device ``model``'s parameters live on (the client data is moved there batch by batch)."""
    return next(model.parameters()).device


def client_generator(seed: int, round_: int, client_id: int) -> torch.Generator:
    """Per-client, per-round torch generator: same draws whatever rank trains the client."""
    mixed = np.random.SeedSequence([seed, round_, client_id, 0x7A1]).generate_state(1, dtype=np.uint64)[0]
    return torch.Generator().manual_seed(int(mixed) & 0x7FFF_FFFF_FFFF_FFFF)


def train_client(model: torch.nn.Module, global_flat: torch.Tensor, shard: ClientShard,
                 local_steps: int, batch_size: int, learning_rate: float, momentum: float,
                 generator: torch.Generator, regulariser=None, global_loss: bool = False,
                 out: np.ndarray | None = None) -> LocalResult:
    """Run ``local_steps`` steps of mini-batch SGD from the global model on one client.

    Mini-batches of ``min(batch_size, num_examples)`` examples walk through
    shuffled passes over the local data (reshuffled when exhausted). Each step
    minimises ``model.loss`` plus, when given, ``regulariser(params,
    global_params)`` (the server optimizer's client-side term, e.g. FedProx's
    proximal term; see :meth:`hpcbench.fl.contracts.Aggregator.client_regulariser`).
    The per-example losses of every step give the statistical utility
    (:class:`LocalResult`).

    Parameters
    ----------
    model : torch.nn.Module
        Work model, overwritten with ``global_flat`` first.
    global_flat : torch.Tensor of shape (P,), float32
    shard : ClientShard
    local_steps, batch_size : int
    learning_rate, momentum : float
    generator : torch.Generator
        Source of the shuffles (see :func:`client_generator`).
    regulariser : callable, optional
        ``term(params, global_params) -> 0-d tensor``.
    global_loss : bool
        Also measure the global model's mean loss on the local data (:func:`local_loss`).
    out : ndarray of shape (P,), float32, optional
        Where to write the update (a row of the executor's result block); the result's ``delta`` is
        then ``out``. Default: a new array.

    Notes
    -----
    On a GPU (``model`` on a CUDA device, ``device: cuda``) every mini-batch is copied there as it is
    drawn; the shuffles stay on the CPU generator, so the same examples are drawn on either device, and
    the update comes back as a host array. On the CPU the moves are no-ops: the bits are the same as
    before the option existed.
    """
    wall0, cpu0 = time.perf_counter(), time.process_time()
    f_global = local_loss(model, global_flat, shard) if global_loss else math.nan
    every = list(model.parameters())
    load_flat_parameters(model, global_flat, every)
    if not model.training:
        model.train()
    params = [p for p in every if p.requires_grad]
    dev = _device_of(model)
    anchor = [p.detach().clone() for p in params] if regulariser is not None else None
    velocity = [torch.zeros_like(p) for p in params] if momentum else None
    n = shard.num_examples
    bs = min(batch_size, n)
    perm = torch.randperm(n, generator=generator)
    pos = 0
    total = 0.0
    squares = 0.0
    seen = 0
    for _ in range(local_steps):
        if pos + bs > n:
            perm = torch.randperm(n, generator=generator)
            pos = 0
        x, y = shard.batch(perm[pos:pos + bs])
        x, y = x.to(dev), y.to(dev)
        pos += bs
        for p in params:
            p.grad = None
        logits = model(x)
        loss = model.loss(logits, y)
        objective = loss if regulariser is None else loss + regulariser(params, anchor)
        objective.backward()
        _sgd_step(params, velocity, learning_rate, momentum)
        total += float(loss.detach())
        squares += float(model.sample_losses(logits.detach(), y).double().pow(2).sum())  # detached: no graph
        seen += len(y)
    with torch.no_grad():  # parameters_to_vector's concatenation, minus the global model
        if out is None:
            delta = torch.cat([p.reshape(-1) for p in every]).cpu().sub_(global_flat).numpy()
        else:
            host = torch.from_numpy(out)
            if dev.type == "cpu":
                torch.cat([p.reshape(-1) for p in every], out=host)
            else:
                host.copy_(torch.cat([p.reshape(-1) for p in every]))
            delta = host.sub_(global_flat).numpy()
    utility = min(n, local_steps * batch_size) * math.sqrt(squares / seen)
    return LocalResult(delta, n, total / local_steps, utility, f_global, time.perf_counter() - wall0,
                       time.process_time() - cpu0)


@torch.no_grad()
def _sgd_step(params, velocity, lr: float, momentum: float) -> None:
    """In-place SGD, ``v <- momentum * v + g; p <- p - lr * v`` (plain ``p -= lr * g`` without momentum).

    The same update as ``torch.optim.SGD`` (no dampening, no weight decay),
    without constructing an optimizer per client.
    """
    if velocity is None:
        for p in params:
            p.add_(p.grad, alpha=-lr)
        return
    for p, v in zip(params, velocity):
        v.mul_(momentum).add_(p.grad)
        p.add_(v, alpha=-lr)


@torch.no_grad()
def evaluate(model: torch.nn.Module, flat: torch.Tensor, x: torch.Tensor, y: torch.Tensor,
             batch_size: int = 512) -> tuple[float, float]:
    """Accuracy (fraction in [0, 1]) and mean cross-entropy of ``flat`` on ``(x, y)``.

    For sequence models every position counts as one prediction.
    """
    load_flat_parameters(model, flat)
    model.eval()
    dev = _device_of(model)
    correct = 0
    loss_sum = 0.0
    count = 0
    for lo in range(0, len(x), batch_size):
        xb, yb = x[lo:lo + batch_size].to(dev), y[lo:lo + batch_size].to(dev)
        logits = model(xb)
        flat_logits = logits.reshape(-1, logits.shape[-1])
        flat_y = yb.reshape(-1)
        loss_sum += float(torch.nn.functional.cross_entropy(flat_logits, flat_y, reduction="sum"))
        correct += int((flat_logits.argmax(dim=1) == flat_y).sum())
        count += flat_y.numel()
    if count == 0:
        return math.nan, math.nan
    return correct / count, loss_sum / count

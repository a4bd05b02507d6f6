"""Client-side local training and server-side evaluation (pure torch, no MPI)."""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

import numpy as np
import torch

from hpcbench.fl.data.base import ClientShard
from hpcbench.fl.models import load_flat_parameters

__all__ = ["LocalResult", "train_client", "evaluate", "client_generator"]


@dataclass
class LocalResult:
    """What a client sends back after local training.

    Attributes
    ----------
    delta : ndarray of shape (P,), float32
        Local minus global parameters.
    num_examples : int
        Local dataset size (FedAvg weight).
    train_loss : float
        Mean training loss over the local steps.
    train_wall_s, train_cpu_s : float
        Wall-clock and process CPU seconds spent training on this rank.
    """

    delta: np.ndarray
    num_examples: int
    train_loss: float
    train_wall_s: float
    train_cpu_s: float


def client_generator(seed: int, round_: int, client_id: int) -> torch.Generator:
    """Per-client, per-round torch generator: same draws whatever rank trains the client."""
    mixed = np.random.SeedSequence([seed, round_, client_id, 0x7A1]).generate_state(1, dtype=np.uint64)[0]
    return torch.Generator().manual_seed(int(mixed) & 0x7FFF_FFFF_FFFF_FFFF)


def train_client(model: torch.nn.Module, global_flat: torch.Tensor, shard: ClientShard,
                 local_steps: int, batch_size: int, learning_rate: float, momentum: float,
                 generator: torch.Generator) -> LocalResult:
    """Run ``local_steps`` steps of mini-batch SGD from the global model on one client.

    Mini-batches of ``min(batch_size, num_examples)`` examples walk through
    shuffled passes over the local data (reshuffled when exhausted).

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
    """
    wall0, cpu0 = time.perf_counter(), time.process_time()
    load_flat_parameters(model, global_flat)
    model.train()
    params = [p for p in model.parameters() if p.requires_grad]
    velocity = [torch.zeros_like(p) for p in params] if momentum else None
    n = shard.num_examples
    bs = min(batch_size, n)
    perm = torch.randperm(n, generator=generator)
    pos = 0
    total = 0.0
    for _ in range(local_steps):
        if pos + bs > n:
            perm = torch.randperm(n, generator=generator)
            pos = 0
        x, y = shard.batch(perm[pos:pos + bs])
        pos += bs
        for p in params:
            p.grad = None
        loss = model.loss(model(x), y)
        loss.backward()
        _sgd_step(params, velocity, learning_rate, momentum)
        total += float(loss.detach())
    with torch.no_grad():
        delta = (torch.nn.utils.parameters_to_vector(model.parameters()) - global_flat).numpy().copy()
    return LocalResult(delta, n, total / local_steps, time.perf_counter() - wall0, time.process_time() - cpu0)


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
    correct = 0
    loss_sum = 0.0
    count = 0
    for lo in range(0, len(x), batch_size):
        xb, yb = x[lo:lo + batch_size], y[lo:lo + batch_size]
        logits = model(xb)
        flat_logits = logits.reshape(-1, logits.shape[-1])
        flat_y = yb.reshape(-1)
        loss_sum += float(torch.nn.functional.cross_entropy(flat_logits, flat_y, reduction="sum"))
        correct += int((flat_logits.argmax(dim=1) == flat_y).sum())
        count += flat_y.numel()
    if count == 0:
        return math.nan, math.nan
    return correct / count, loss_sum / count

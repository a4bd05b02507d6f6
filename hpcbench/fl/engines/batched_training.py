"""Opt-in fast path (``client_training: batched``): many clients' local SGD as one batched computation.

The default (``sequential``) trains one client after another with
:func:`hpcbench.fl.engines.training.train_client`; a round of 1,300 digits clients
then costs 1,300 x 5 small forward/backward passes whose time is mostly
per-operation overhead. Here the clients of a group train together:
``torch.func.vmap`` of ``torch.func.grad`` over ``torch.func.functional_call``
evaluates every client's step as one batched operation on a stack of
per-client parameter copies (shape ``(m, *p.shape)``), and the SGD update is
applied to the stack.

It is the same algorithm (the same mini-batches, drawn from the same
per-client generators; the same objective, regulariser, momentum and
learning rate; the same :class:`hpcbench.fl.engines.training.LocalResult` fields),
but batched kernels sum in another order than the per-client ones, so the
updates differ from the sequential path's in the last bits (relative
differences of order 1e-6 per step, which training compounds): results are
not bit-identical to ``sequential`` (nor across world sizes when groups
differ), which is why it is opt-in. ``tests/test_fl_batched.py`` checks that
it trains equivalently: per-client updates agree within a tight tolerance
after one round, and a whole job reaches the same accuracy.

Limits (:class:`hpcbench.fl.engines.batched.BatchedEngine`, checked by the
config): models that read feature vectors or images (``mlp``, ``logreg``,
LEAF's ``cnn``, a user's module) and whose training changes no buffer
(BatchNorm's running statistics would be written inside ``vmap``);
synchronous rounds. Clients are grouped by mini-batch size
``min(batch_size, num_examples)`` and trained in chunks of at most
:data:`CHUNK` clients, fewer for a large model: a chunk's stacked
parameters, gradients and momentum stay within :data:`STACK_BYTES`
(LEAF's CNN, 6.6 M parameters: 20 clients at a time, 13 with momentum). ``train_wall_s``/``train_cpu_s`` of a
client are its chunk's times divided evenly over the chunk's clients.
"""

from __future__ import annotations

import math
import time

import numpy as np
import torch

from hpcbench.fl.models import load_flat_parameters
from hpcbench.fl.engines.numpy_training import chunks_by_batch_size
from hpcbench.fl.engines.training import LocalResult, local_loss

__all__ = ["CHUNK", "STACK_BYTES", "chunk_size", "train_clients_batched"]

#: most clients trained together (bounds the stacked parameters, gradients and mini-batches in memory)
CHUNK = 512
#: bytes a chunk's stacked parameter copies, gradients and momentum buffers may take
STACK_BYTES = 1 << 30


def chunk_size(num_parameters: int, momentum: float) -> int:
    """Clients trained together: :data:`CHUNK`, fewer when their float32 stacks would pass :data:`STACK_BYTES`."""
    per_client = 4 * num_parameters * (3 if momentum else 2)   # values and gradients (+ velocity)
    return max(1, min(CHUNK, STACK_BYTES // max(per_client, 1)))


def _batch_indices(n: int, bs: int, local_steps: int, generator: torch.Generator) -> torch.Tensor:
    """The ``(local_steps, bs)`` local example indices :func:`train_client` visits, from the same draws."""
    perm = torch.randperm(n, generator=generator)
    pos, out = 0, []
    for _ in range(local_steps):
        if pos + bs > n:
            perm = torch.randperm(n, generator=generator)
            pos = 0
        out.append(perm[pos:pos + bs])
        pos += bs
    return torch.stack(out)


def train_clients_batched(model: torch.nn.Module, global_flat: torch.Tensor, shards: list, local_steps: int,
                          batch_size: int, learning_rate: float, momentum: float, generators: list,
                          regulariser=None, global_loss: bool = False) -> list[LocalResult]:
    """Local SGD of every client of ``shards`` from ``global_flat``, batched over clients.

    Parameters
    ----------
    model : torch.nn.Module
        Work model (its structure is used; its parameters are overwritten).
    global_flat : torch.Tensor of shape (P,), float32
    shards : list of hpcbench.fl.data.base.ClientShard
    local_steps, batch_size : int
    learning_rate, momentum : float
    generators : list of torch.Generator
        One per shard, as :func:`hpcbench.fl.engines.training.client_generator` gives.
    regulariser : callable, optional
        ``term(params, global_params) -> 0-d tensor`` (applied per client).
    global_loss : bool
        Also measure each client's global-model loss (:func:`local_loss`).

    Returns
    -------
    list of LocalResult
        In the order of ``shards``; the fields of :func:`train_client`'s.
    """
    results: list[LocalResult | None] = [None] * len(shards)
    most = chunk_size(global_flat.numel(), momentum)
    for bs, chunk in chunks_by_batch_size([s.num_examples for s in shards], batch_size, most):
        for i, res in zip(chunk, _train_chunk(model, global_flat, [shards[i] for i in chunk], bs, local_steps,
                                              batch_size, learning_rate, momentum,
                                              [generators[i] for i in chunk], regulariser, global_loss)):
            results[i] = res
    return results


def _train_chunk(model, global_flat, shards, bs, local_steps, batch_size, lr, momentum, generators, regulariser,
                 global_loss) -> list[LocalResult]:
    from torch.func import functional_call, grad, vmap

    wall0, cpu0 = time.perf_counter(), time.process_time()
    m = len(shards)
    f_global = [local_loss(model, global_flat, s) if global_loss else math.nan for s in shards]
    load_flat_parameters(model, global_flat)
    if not model.training:
        model.train()
    named = [(name, p) for name, p in model.named_parameters()]
    names = [name for name, _ in named]
    trainable = [p.requires_grad for _, p in named]
    anchor = [p.detach().clone() for _, p in named]
    # every client's mini-batches: (m, steps, bs, ...) inputs and targets
    xs, ys = [], []
    for shard, gen in zip(shards, generators):
        x, y = shard.batch(_batch_indices(shard.num_examples, bs, local_steps, gen).reshape(-1))
        xs.append(x.reshape(local_steps, bs, *x.shape[1:]))
        ys.append(y.reshape(local_steps, bs, *y.shape[1:]))
    dev = anchor[0].device          # the model's device (device: cuda): the mini-batches go there
    xs, ys = torch.stack(xs).to(dev), torch.stack(ys).to(dev)

    def objective(values, x, y):
        logits = functional_call(model, dict(zip(names, values)), (x,))
        loss = model.loss(logits, y)
        total = loss if regulariser is None else \
            loss + regulariser([v for v, t in zip(values, trainable) if t], [a for a, t in zip(anchor, trainable) if t])
        return total, (loss.detach(), model.sample_losses(logits.detach(), y))

    step = vmap(grad(objective, has_aux=True))
    values = tuple(a.expand(m, *a.shape).clone() for a in anchor)
    velocity = [torch.zeros_like(v) for v in values] if momentum else None
    total = torch.zeros(m, dtype=torch.float64, device=dev)
    squares = torch.zeros(m, dtype=torch.float64, device=dev)
    for s in range(local_steps):
        grads, (loss, per) = step(values, xs[:, s], ys[:, s])
        with torch.no_grad():
            for j, (v, g) in enumerate(zip(values, grads)):
                if not trainable[j]:
                    continue
                if velocity is None:
                    v.add_(g, alpha=-lr)
                else:
                    velocity[j].mul_(momentum).add_(g)
                    v.add_(velocity[j], alpha=-lr)
        total += loss.double()
        squares += per.double().pow(2).reshape(m, -1).sum(dim=1)
    seen = local_steps * bs  # examples, as train_client counts them
    with torch.no_grad():
        deltas = (torch.cat([v.reshape(m, -1) for v in values], dim=1).cpu() - global_flat).numpy()
    wall = (time.perf_counter() - wall0) / m
    cpu = (time.process_time() - cpu0) / m
    total, squares = total.cpu(), squares.cpu()
    out = []
    for k, shard in enumerate(shards):
        n = shard.num_examples
        utility = min(n, local_steps * batch_size) * math.sqrt(float(squares[k]) / seen)
        out.append(LocalResult(deltas[k], n, float(total[k]) / local_steps, utility, f_global[k], wall, cpu))
    return out

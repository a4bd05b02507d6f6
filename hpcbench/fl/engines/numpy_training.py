"""Torch-free client training (``client_training: numpy``): local SGD and evaluation in numpy.

The same algorithm as :func:`hpcbench.fl.engines.training.train_client` (mini-batch
SGD from the global model over shuffled passes of the local data, reshuffled
when exhausted; the same objective, FedProx term, momentum, learning rate and
:class:`hpcbench.fl.engines.training.LocalResult` fields) on
:class:`hpcbench.fl.models.numpy_mlp.NumpyMLP`, with no rank importing torch:
``import torch`` alone costs a process about 220 MB of private resident
memory, most of what a digits executor holds.

Clients of one mini-batch size train together (a stack of their parameter
vectors, one batched ``np.matmul`` per layer and step), in chunks of at most
:data:`CHUNK`.

Deliberate differences from the torch engines: the shuffles come from
numpy's PCG64 seeded with the same ``(seed, round, client)`` as
:func:`hpcbench.fl.engines.training.client_generator` (torch's ``randperm`` cannot be
reproduced without torch), and the initial model is drawn from numpy's
generator (:meth:`NumpyMLP.init_parameters`), so a run is not the torch
engine's run bit for bit. Given the same initial vector and the same
mini-batch indices, one client's local training agrees with the torch
engine's within float32 rounding (``tests/test_fl_numpy.py``).
"""

from __future__ import annotations

import math
import time

import numpy as np

from hpcbench.fl.training_result import LocalResult

__all__ = ["CHUNK", "chunks_by_batch_size", "client_rng", "batch_indices", "train_clients_numpy", "local_losses", "evaluate_numpy"]

#: most clients trained together (bounds the stacked parameters, gradients and mini-batches in memory)
CHUNK = 64


def client_rng(seed: int, stream: int, client_id: int) -> np.random.Generator:
    """Per-client, per-round numpy generator, seeded as :func:`hpcbench.fl.engines.training.client_generator`."""
    return np.random.Generator(np.random.PCG64(np.random.SeedSequence([seed, stream, client_id, 0x7A1])))


def batch_indices(n: int, bs: int, local_steps: int, rng: np.random.Generator) -> np.ndarray:
    """The ``(local_steps, bs)`` int64 local example indices of a client's steps.

    Walks shuffled passes over the ``n`` local examples, a new permutation
    when fewer than ``bs`` remain, as :func:`hpcbench.fl.engines.training.train_client`.
    """
    perm = rng.permutation(n)
    pos, out = 0, np.empty((local_steps, bs), np.int64)
    for s in range(local_steps):
        if pos + bs > n:
            perm = rng.permutation(n)
            pos = 0
        out[s] = perm[pos:pos + bs]
        pos += bs
    return out


def train_clients_numpy(model, global_flat: np.ndarray, shards: list, local_steps: int, batch_size: int,
                        learning_rate: float, momentum: float, indices: list | None = None,
                        regulariser_gradient=None, global_loss: bool = False, out: np.ndarray | None = None,
                        rngs: list | None = None) -> list[LocalResult]:
    """Local SGD of every client from ``global_flat``, in numpy.

    Each step is ``g = grad L_k(w) + grad R(w, w_global)`` (``R`` the server
    optimizer's client-side term, e.g. FedProx's ``mu/2 ||w - w_global||^2``
    with gradient ``mu (w - w_global)``); with momentum
    ``v <- momentum v + g``, ``w <- w - lr v``, else ``w <- w - lr g``
    (``torch.optim.SGD`` without dampening or weight decay).

    Parameters
    ----------
    model : hpcbench.fl.models.numpy_mlp.NumpyMLP
    global_flat : ndarray of shape (P,), float32
    shards : list of (ndarray (n_k, F) float32, ndarray (n_k,) int64)
        Each client's local inputs and labels.
    local_steps, batch_size : int
    learning_rate, momentum : float
    indices : list of ndarray of shape (local_steps, min(batch_size, n_k)), int64, optional
        Each client's mini-batches (:func:`batch_indices`); give this or ``rngs``.
    rngs : list of numpy.random.Generator, optional
        Each client's generator (:func:`client_rng`): its mini-batches are
        drawn with :func:`batch_indices` inside the timed part, as the torch
        engine times its clients' shuffles.
    regulariser_gradient : callable, optional
        ``grad(params (m, P), global_params (P,)) -> (m, P)``, from
        :meth:`hpcbench.fl.contracts.Aggregator.client_regulariser_gradient`.
    global_loss : bool
        Also measure each client's global-model loss ``F_k`` (:func:`local_losses`).
    out : ndarray of shape (len(shards), P), float32, optional
        Where to write the updates (the caller's send buffer); new arrays when None.

    Returns
    -------
    list of LocalResult
        In the order of ``shards``, each ``delta`` a row of ``out``;
        ``train_wall_s``/``train_cpu_s`` are the chunk's times divided evenly
        over its clients.
    """
    if (indices is None) == (rngs is None):
        raise ValueError("give exactly one of indices and rngs")
    if out is None:
        out = np.empty((len(shards), len(global_flat)), np.float32)
    results: list[LocalResult | None] = [None] * len(shards)
    for bs, chunk in chunks_by_batch_size([len(y) for _, y in shards], batch_size):
        trained = _train_chunk(model, global_flat, [shards[i] for i in chunk],
                               [indices[i] for i in chunk] if rngs is None else [rngs[i] for i in chunk], bs,
                               local_steps, batch_size, learning_rate, momentum, regulariser_gradient, global_loss,
                               out, chunk)
        for i, res in zip(chunk, trained):
            results[i] = res
    return results


def chunks_by_batch_size(sizes, batch_size: int, chunk: int = CHUNK):
    """Clients that can train together: ``(bs, positions)`` per group of equal mini-batch size.

    ``bs = min(batch_size, n_k)`` for local example counts ``sizes``; groups
    in ascending ``bs``, each cut into runs of at most ``chunk`` positions
    (indices into ``sizes``, ascending). Shared with
    :mod:`hpcbench.fl.engines.batched_training`.
    """
    groups: dict[int, list[int]] = {}
    for i, n in enumerate(sizes):
        groups.setdefault(min(batch_size, int(n)), []).append(i)
    for bs, members in sorted(groups.items()):
        for lo in range(0, len(members), chunk):
            yield bs, members[lo:lo + chunk]


def _train_chunk(model, global_flat, shards, indices, bs, local_steps, batch_size, lr, momentum, reg_grad,
                 global_loss, out, rows) -> list[LocalResult]:
    wall0, cpu0 = time.perf_counter(), time.process_time()
    m = len(shards)
    if indices and not isinstance(indices[0], np.ndarray):  # generators: draw the shuffles here, timed
        indices = [batch_indices(len(y), bs, local_steps, rng) for (_, y), rng in zip(shards, indices)]
    f_global = local_losses(model, global_flat, shards) if global_loss else np.full(m, math.nan)
    xs = np.stack([x[idx] for (x, _), idx in zip(shards, indices)])  # (m, steps, bs, F)
    ys = np.stack([y[idx] for (_, y), idx in zip(shards, indices)])  # (m, steps, bs)
    w = np.repeat(global_flat[None, :], m, axis=0)
    g = np.empty_like(w)
    v = np.zeros_like(w) if momentum else None
    lr32, mom32 = np.float32(lr), np.float32(momentum)
    total = np.zeros(m)
    squares = np.zeros(m)
    for s in range(local_steps):
        losses = model.loss_and_grad(w, xs[:, s], ys[:, s], g)
        if reg_grad is not None:
            g += reg_grad(w, global_flat)
        if v is None:
            w -= lr32 * g
        else:
            v *= mom32
            v += g
            w -= lr32 * v
        total += losses.mean(axis=1, dtype=np.float32)
        squares += np.square(losses.astype(np.float64)).sum(axis=1)
    w -= global_flat
    out[rows] = w
    seen = local_steps * bs
    wall = (time.perf_counter() - wall0) / m
    cpu = (time.process_time() - cpu0) / m
    return [LocalResult(out[rows[k]], len(x), float(total[k]) / local_steps,
                        min(len(x), local_steps * batch_size) * math.sqrt(float(squares[k]) / seen),
                        float(f_global[k]), wall, cpu) for k, (x, _) in enumerate(shards)]


def local_losses(model, flat: np.ndarray, shards: list) -> np.ndarray:
    """Mean per-example loss of ``flat`` (shape (P,)) over each client's whole local data (``F_k``), float64 (m,)."""
    out = np.empty(len(shards))
    one = flat[None, :]
    for k, (x, y) in enumerate(shards):
        out[k] = model.sample_losses(model.logits(one, x[None]), y[None]).astype(np.float64).sum() / len(x)
    return out


def evaluate_numpy(model, flat: np.ndarray, x: np.ndarray, y: np.ndarray,
                   batch_size: int = 512) -> tuple[float, float]:
    """Accuracy (fraction in [0, 1]) and mean cross-entropy (nat) of ``flat`` (P,) on ``x`` (n, F), ``y`` (n,)."""
    if len(x) == 0:
        return math.nan, math.nan
    correct, loss_sum = 0, 0.0
    one = flat[None, :]
    for lo in range(0, len(x), batch_size):
        logits = model.logits(one, x[None, lo:lo + batch_size])
        yb = y[None, lo:lo + batch_size]
        loss_sum += float(model.sample_losses(logits, yb).astype(np.float64).sum())
        correct += int((logits.argmax(axis=-1) == yb).sum())
    return correct / len(x), loss_sum / len(x)

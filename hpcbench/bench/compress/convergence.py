"""Convergence check: data-parallel MLP training on scikit-learn's digits, per compressor.

Each rank trains on its shard of the training split; every step the
gradients are error-compensated, compressed and summed with
:func:`hpcbench.collectives.compressed.compressed_allreduce`, divided by the
world size, and applied with SGD + momentum at ``lr * compressor.lr_scale``
(the per-method multiplier each compressor documents). All ranks start from the same
weights and apply the same update, so they stay identical. Reports the final
training loss (full training split) and test accuracy.
"""

from __future__ import annotations

import numpy as np
import torch
from mpi4py import MPI

from hpcbench.collectives.compressed import compressed_allreduce
from hpcbench.collectives.transport import Transport
from hpcbench.compress import ErrorFeedback, build, compressor_class

__all__ = ["train"]


def _data(seed: int):
    from sklearn.model_selection import train_test_split

    from hpcbench.datasets.digits import read_digits

    X, y = read_digits()
    return train_test_split(X, y, test_size=0.25, random_state=seed, stratify=y)


def train(compressor: str, comm: MPI.Comm, steps: int = 300, batch: int = 32, lr: float = 0.1,
          momentum: float = 0.9, hidden: int = 64, seed: int = 0, transport=None,
          lr_scale: float | None = None) -> dict:
    """Train and evaluate one configuration (collective over ``comm``).

    Returns
    -------
    dict
        ``compressor``, ``final_loss`` (cross-entropy on the training split),
        ``test_accuracy`` (fraction), ``wire_bytes`` (sent by this rank),
        ``lr_scale`` (the multiplier of ``lr`` used).

    Notes
    -----
    The learning rate is ``lr * compressor.lr_scale`` (a documented,
    per-method attribute: 0.3 for signSGD, 0.5 for EF-signSGD,
    ``2 * ratio`` for random-k, 1 otherwise) unless ``lr_scale`` is
    given explicitly (sweeps).
    """
    Xtr, Xte, ytr, yte = _data(seed)
    shard = np.arange(comm.rank, len(Xtr), comm.size)
    Xs, ys = torch.from_numpy(Xtr[shard]), torch.from_numpy(ytr[shard])
    torch.manual_seed(seed)
    model = torch.nn.Sequential(torch.nn.Linear(64, hidden), torch.nn.ReLU(), torch.nn.Linear(hidden, 10))
    # each compressor's own contractive options (Compressor.ef_options); per-rank rounding seeds
    comp = build(compressor, seed=seed * 1000 + comm.rank, **compressor_class(compressor).ef_options)
    mem = ErrorFeedback()
    scale = comp.lr_scale if lr_scale is None else float(lr_scale)
    opt = torch.optim.SGD(model.parameters(), lr=lr * scale, momentum=momentum)
    rng = np.random.default_rng(seed + 17 * comm.rank)
    loss_fn = torch.nn.CrossEntropyLoss()
    tr = transport if transport is not None else Transport(comm)
    before = tr.bytes_sent
    for step in range(steps):
        b = rng.integers(0, len(Xs), size=min(batch, len(Xs)))
        opt.zero_grad()
        loss_fn(model(Xs[b]), ys[b]).backward()
        for i, p in enumerate(model.parameters()):
            g = compressed_allreduce(p.grad, f"p{i}", comp, mem, transport=tr)
            p.grad.copy_(g / comm.size)
        opt.step()
    with torch.no_grad():
        final_loss = float(loss_fn(model(torch.from_numpy(Xtr)), torch.from_numpy(ytr)))
        acc = float((model(torch.from_numpy(Xte)).argmax(1).numpy() == yte).mean())
    return {"compressor": compressor, "final_loss": final_loss, "test_accuracy": acc,
            "wire_bytes": tr.bytes_sent - before, "lr_scale": scale}

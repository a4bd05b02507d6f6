"""``client_training: sequential``: one torch model per client, one client after another (any model)."""

from __future__ import annotations

import numpy as np

from hpcbench.fl.engines.torch_engine import TorchEngine

__all__ = ["SequentialEngine"]


class SequentialEngine(TorchEngine):
    """Trains each client alone with :func:`hpcbench.fl.engines.training.train_client`.

    Supports every model and job; the bits of versions before ``client_training: auto``.
    """

    name = "sequential"
    auto_preference = 2
    description = "torch, one client after another"

    def __init__(self, model, dataset, local, aggregator) -> None:
        super().__init__(model, dataset, local, aggregator)
        self._regulariser = aggregator.client_regulariser()

    def train_run(self, client_ids, streams, start, lr, block) -> None:
        import torch

        from hpcbench.fl.engines.training import client_generator, train_client

        s = self.local
        start = torch.from_numpy(start)
        for i, cid in enumerate(client_ids.tolist()):
            res = train_client(self.model, start, self.dataset.shard(cid), s.local_steps, s.batch_size, lr,
                               s.momentum, client_generator(s.seed, int(streams[i]), cid), self._regulariser,
                               self.aggregator.needs_global_loss, out=block.deltas[i])
            block.store(i, res, copy=False)

"""``client_training: batched``: an executor's clients vmapped together (:mod:`hpcbench.fl.engines.batched_training`)."""

from __future__ import annotations

from hpcbench.fl.engines.torch_engine import TorchEngine

__all__ = ["BatchedEngine"]


class BatchedEngine(TorchEngine):
    """Trains a run of clients as one batched computation (``torch.func``); not bit-identical to ``sequential``.

    Models reading feature vectors or images whose training changes no
    buffer (BatchNorm's running statistics would be written inside
    ``vmap``), in synchronous rounds. ``auto`` picks it for image models on
    ``device: cuda`` only (a CNN client's step is a few kernels too small for
    a GPU; vmapping an executor's clients makes each one batched kernel); on
    the CPU vmapped convolutions become grouped ones, which the CPU kernels
    do not run faster than one client after another, and feature models keep
    the bits of ``numpy`` or ``sequential``.
    """

    name = "batched"
    auto_preference = 1
    description = "torch vmap, an executor's clients at once"
    input_kinds = ("features", "images")
    modes = ("sync",)
    needs_functional = True
    auto_input_kinds = ("images",)
    auto_devices = ("cuda",)

    def __init__(self, model, dataset, local, aggregator) -> None:
        super().__init__(model, dataset, local, aggregator)
        self._regulariser = aggregator.client_regulariser()

    def train_run(self, client_ids, streams, start, lr, block) -> None:
        import torch

        from hpcbench.fl.engines.batched_training import train_clients_batched
        from hpcbench.fl.engines.training import client_generator

        s = self.local
        ids = client_ids.tolist()
        results = train_clients_batched(
            self.model, torch.from_numpy(start), [self.dataset.shard(c) for c in ids], s.local_steps,
            s.batch_size, lr, s.momentum, [client_generator(s.seed, int(streams[i]), c) for i, c in enumerate(ids)],
            self._regulariser, self.aggregator.needs_global_loss)
        for i, res in enumerate(results):
            block.store(i, res)

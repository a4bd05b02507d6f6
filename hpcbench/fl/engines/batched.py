"""``client_training: batched``: an executor's clients vmapped together (:mod:`hpcbench.fl.engines.batched_training`)."""

from __future__ import annotations

from hpcbench.fl.engines.torch_engine import TorchEngine

__all__ = ["BatchedEngine"]


class BatchedEngine(TorchEngine):
    """Trains a run of clients as one batched computation (``torch.func``); not bit-identical to ``sequential``.

    Opt-in (never chosen by ``auto``): feature-vector models of synchronous jobs.
    """

    name = "batched"
    description = "torch vmap, an executor's clients at once"

    def __init__(self, model, dataset, local, aggregator) -> None:
        super().__init__(model, dataset, local, aggregator)
        self._regulariser = aggregator.client_regulariser()

    @classmethod
    def supports(cls, model) -> bool:
        return model.input_kind == "features"

    @classmethod
    def problems(cls, job) -> list[str]:
        return ([f"mode {job.mode!r} (needs 'sync')"] if job.mode != "sync" else []) + cls._model_problem(job)

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

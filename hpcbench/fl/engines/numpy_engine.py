"""``client_training: numpy``: torch-free local SGD in stacked matrix products (:mod:`hpcbench.fl.engines.numpy_training`)."""

from __future__ import annotations

import numpy as np

from hpcbench.fl.engines.base import ClientEngine

__all__ = ["NumpyEngine"]


class NumpyEngine(ClientEngine):
    """Trains a model's numpy twin (``ModelEntry.numpy_target``); no rank of a job it trains imports torch.

    ``auto``'s first choice wherever it can train the job: a model with a
    numpy twin, synchronous rounds, no compression codec, no FLOPs
    counting, an aggregator whose client-side term has a numpy gradient, and
    the CPU.
    """

    name = "numpy"
    needs_torch = False
    auto_preference = 0
    description = "torch-free: no rank imports torch"

    @classmethod
    def supports(cls, model) -> bool:
        return model.numpy_target is not None

    @classmethod
    def auto_accepts(cls, job) -> bool:
        return not cls.problems(job)

    @classmethod
    def problems(cls, job) -> list[str]:
        problems = []
        if job.device == "cuda":
            problems.append("device 'cuda' (the numpy engine computes on the CPU; needs 'cpu' or 'auto')")
        if job.mode != "sync":
            problems.append(f"mode {job.mode!r} (needs 'sync')")
        problems += cls._model_problem(job)
        for key, name, enabled in job.compression:
            if enabled:
                problems.append(f"{key}.name {name!r} (the codecs are torch's; needs 'none')")
        if job.compute_cost != "trace":
            problems.append(f"traces.compute_cost {job.compute_cost!r} (torch counts the FLOPs; needs 'trace')")
        agg = job.aggregator
        if agg.client_regulariser() is not None and agg.client_regulariser_gradient() is None:
            problems.append(f"aggregator {job.aggregator_name!r} (its client-side term has no numpy gradient)")
        return problems

    def train_run(self, client_ids, streams, start, lr, block) -> None:
        from hpcbench.fl.engines.numpy_training import client_rng, train_clients_numpy

        s = self.local
        ids = client_ids.tolist()
        shards = [self.dataset.shard_arrays(c) for c in ids]
        rngs = [client_rng(s.seed, int(streams[i]), c) for i, c in enumerate(ids)]
        results = train_clients_numpy(self.model, start, shards, s.local_steps, s.batch_size, lr, s.momentum, None,
                                      self.aggregator.client_regulariser_gradient(),
                                      self.aggregator.needs_global_loss, out=block.deltas, rngs=rngs)
        for i, res in enumerate(results):
            block.store(i, res, copy=False)

    @staticmethod
    def initial_parameters(model) -> np.ndarray:
        return model.initial.copy()

    @staticmethod
    def test_set(dataset):
        return dataset.test_arrays()

    @staticmethod
    def evaluate(model, params: np.ndarray, x, y) -> tuple[float, float]:
        from hpcbench.fl.engines.numpy_training import evaluate_numpy

        return evaluate_numpy(model, params, x, y)

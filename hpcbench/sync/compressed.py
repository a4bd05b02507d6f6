"""``compressed``: any hpcbench compressor with error feedback, through the compressed collectives.

The compressors and the compressed collectives are torch code: they are
imported when a ``compressed`` synchroniser is built, not with this module
(the registry imports every synchroniser's module to read its config section).
"""

from __future__ import annotations

from typing import Annotated, Literal, Optional, Union

from pydantic import BeforeValidator, Field, field_validator, model_validator

from hpcbench.compress.config import CompressorConfig
from hpcbench.runtime.wait import Backoff
from hpcbench.sync.base import Synchroniser, SyncConfig

__all__ = ["CompressedSync"]


class CompressedSync(Synchroniser):
    """Compressed allreduce of each bucket with error feedback (Seide et al. 2014; Stich et al. 2018).

    Per bucket ``b`` and step: ``acc = g_b + e_b``, ``payload = C(acc)``,
    ``e_b = acc - D(payload)`` (:class:`hpcbench.compress.memory.ErrorFeedback`,
    keyed by bucket), and the bucket becomes ``sum over ranks of D(payload_r)
    / p`` (:func:`hpcbench.collectives.compressed.icompressed_allreduce`,
    whose communication pattern follows the compressor's kind). With the
    ``none`` compressor this is a dense ring allreduce. The compressed
    collectives progress inside ``test``/``wait``: the runner tests the open
    buckets from its gradient hooks. No alpha-beta model: the payload size
    depends on the compressor.

    **CPU sparse optimizer** (``optimizer: {name: sgd, momentum: 0.9}``,
    StellaTrain's ``backend/src/optim/sgd.cpp`` / ``adam.cpp`` applied in
    ``engine/modules/cpu_optimize.cpp``): a sparse compressor's allreduce
    returns its ``output="sparse"`` result, the per-rank ``(indices, values)``
    parts (:class:`~hpcbench.collectives.compressed.sparse_sum.SparseSum`),
    which :meth:`wait` hands back instead of writing the bucket, and the
    runner applies it to the bucket's parameters with
    :class:`hpcbench.optim.SparseSGD` or :class:`~hpcbench.optim.SparseAdam`
    (averaged over the ``p`` ranks, never densified). With plain SGD
    (``momentum: 0``, ``weight_decay: 0``) this is the dense path's update:
    each touched element moves by ``-lr * sum / p`` and the others by
    ``-lr * 0``. StellaTrain keeps one optimizer state per parameter tensor;
    here state is per bucket (``bucket{b}``), the name the compressed
    allreduce uses.

    **Staleness** (``staleness: 0 | 1``, StellaTrain 3.3: compression,
    communication and the CPU optimizer of step ``t`` run while step ``t+1``
    computes). With ``w_t`` the parameters step ``t``'s forward and backward
    run on, ``G_t`` step ``t``'s reduced gradient (computed at ``w_t``) and
    ``U(G)`` the optimizer's update:

    - ``staleness: 0``: ``w_{t+1} = w_t + U(G_t)``; each step waits for its
      own buckets after backward and applies them before the next forward
      (the synchroniser's result is bit for bit the same as without the key).
    - ``staleness: 1``: ``w_0 = w_1``, and ``w_{t+1} = w_t + U(G_{t-1})`` for
      ``t >= 1``: step ``t``'s buckets stay in flight (progressed from step
      ``t+1``'s gradient hooks) while step ``t+1`` runs forward and backward
      on ``w_{t+1}``; after step ``t+1``'s backward the runner waits for step
      ``t``'s buckets and applies ``U(G_t)``, so step ``t+2`` runs on the
      parameters updated through step ``t``. The last step's update is
      applied when the run ends. Each step's buckets live in their own buffer
      set (two sets, alternating, as StellaTrain's ``iter % (staleness + 1)``
      shared CPU tensors), and error feedback is updated when a bucket is
      encoded, at its start, so step ``t+1`` compresses ``g_{t+1} + e_t``.
      StellaTrain waits per layer only until the layer's version is
      ``>= iteration - 1`` (``core.cpp`` ``pre_forward_process``), so a
      layer whose step-``t`` update is already applied uses it; hpcbench
      applies the whole of step ``t``'s update at one point, which meets that
      bound with equality and makes a run's result independent of timing.
    """

    class Config(SyncConfig):
        """The compressor (``compressor: topk`` is short for ``compressor: {name: topk}``), the CPU sparse
        optimizer and the staleness."""

        compressor: Annotated[CompressorConfig, BeforeValidator(lambda v: {"name": v} if isinstance(v, str) else v)] \
            = Field(CompressorConfig(), description="compressor of hpcbench.compress with its ratio and options")
        optimizer: Optional[dict[str, Union[bool, int, float, str, list[float]]]] = Field(
            None, description="CPU sparse optimizer applying the sparse allreduce's (indices, values) without "
                              "densifying (StellaTrain): {name: sgd | adam, ...its options: momentum, dampening, "
                              "weight_decay, nesterov, smart_momentum; betas, eps, amsgrad}; the learning rate is "
                              "the job's lr; needs a sparse compressor (topk, thresholdv, dgc, randomk...)")
        staleness: Literal[0, 1] = Field(0, description="1: step t's compression, communication and update run "
                                                        "while step t+1 computes (StellaTrain's pipeline: step t+1 "
                                                        "runs on the parameters updated through step t-1)")

        @field_validator("optimizer")
        @classmethod
        def _optimizer(cls, v):
            if v is None:
                return v
            from hpcbench.optim import OPTIMIZERS, create
            from hpcbench.runtime.errors import InputError

            options = dict(v)
            name = options.pop("name", None)
            if not isinstance(name, str):
                raise ValueError(f"optimizer {v!r} has no name (e.g. {{name: sgd, momentum: 0.9}})")
            if "lr" in options:
                raise ValueError("optimizer: lr is the job's lr, not an optimizer option")
            if "betas" in options:
                options["betas"] = tuple(options["betas"])
            try:
                OPTIMIZERS.check(name)
                create(name, lr=1.0, **options)
            except (InputError, KeyError) as exc:
                raise ValueError(str(exc).strip("'\"")) from None
            return v

        @model_validator(mode="after")
        def _sparse_result(self):
            if self.optimizer is not None:
                if self.compressor.name == "none":
                    raise ValueError("optimizer: the CPU sparse optimizer needs a sparse compressor (topk, "
                                     "thresholdv, dgc, randomk...), got compressor 'none'")
                from hpcbench.collectives.compressed import COMMUNICATORS
                from hpcbench.compress.registry import REGISTRY

                kind = REGISTRY[self.compressor.name].kind
                if not COMMUNICATORS[kind].sparse_output:
                    raise ValueError(f"optimizer: the CPU sparse optimizer needs a sparse compressor (topk, "
                                     f"thresholdv, dgc, randomk...); {self.compressor.name!r} sends {kind} payloads")
            return self

    name = "compressed"

    def __init__(self, comm, transport=None, config=None, **facts) -> None:
        super().__init__(comm, transport, config, **facts)
        import torch

        from hpcbench.collectives.compressed import icompressed_allreduce
        from hpcbench.compress.memory import ErrorFeedback

        self._as_tensor, self._allreduce = torch.as_tensor, icompressed_allreduce
        self.compressor = self.config.compressor.build(seed=self.seed * 1009 + comm.rank)
        self.memory = ErrorFeedback()
        self._output = "sparse" if self.config.optimizer is not None else "dense"

    @property
    def staleness(self) -> int:
        return int(self.config.staleness)

    def sparse_optimizer(self, lr: float):
        """The configured :mod:`hpcbench.optim` optimizer at learning rate ``lr`` (None without ``optimizer``)."""
        if self.config.optimizer is None:
            return None
        from hpcbench.optim import create

        options = dict(self.config.optimizer)
        name = options.pop("name")
        if "betas" in options:
            options["betas"] = tuple(options["betas"])
        return create(name, lr=lr, **options)

    @classmethod
    def adjusts_ratio(cls, config) -> bool:
        """A compressor that takes a ratio (top-k, threshold-v, random-k...) can change it between steps."""
        if config.compressor.name == "none":
            return False
        from hpcbench.compress.registry import REGISTRY

        return bool(REGISTRY[config.compressor.name].takes_ratio)

    def use_ratio(self, ratio: float) -> None:
        """The compressor keeps ``ratio`` of each bucket's elements from the next start on; its other state (a
        threshold's adaptation) and the error feedback are kept."""
        from hpcbench.compress.base import check_ratio

        if not self.adjusts_ratio(self.config):
            super().use_ratio(ratio)
        self.compressor.ratio = check_ratio(ratio)

    @property
    def ratio(self) -> float:
        return float(getattr(self.compressor, "ratio", 1.0))

    def start(self, flat, index):
        flat = self._as_tensor(flat)      # an emulated run's numpy bucket: a tensor sharing its memory
        sparse = self._output == "sparse"
        return flat, self._allreduce(flat, f"bucket{index}", self.compressor, self.memory,
                                     transport=self.transport, comm=self.comm, out=None if sparse else flat,
                                     output=self._output)

    def test(self, handle):
        return handle[1].test()

    def wait(self, handle):
        flat, req = handle
        result = req.wait(Backoff(spin=16, max_s=5e-4))
        if self._output == "sparse":
            return result       # the sum over ranks, as (indices, values) parts: the optimizer averages it
        if self.comm.size > 1:
            flat /= self.comm.size
        return None


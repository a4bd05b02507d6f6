"""Client-training engines; ``ENGINES`` maps ``client_training`` to a :class:`ClientEngine` class.

Torch-free at import (config validation reads it on every rank). Each
engine declares what it trains (input kinds, modes, models with buffers;
the numpy engine's support depends on more than the model).
``client_training: auto`` is :func:`auto_engine`: in ``auto_preference``
order, the first engine that :meth:`~ClientEngine.auto_accepts` the job:
``numpy``, then ``batched`` for image models on ``device: cuda``, then
``sequential``. Feature models that the numpy engine cannot train
(compression, FLOPs pricing, FedBuff) stay on ``sequential`` under
``auto``, keeping the bits of versions before ``batched`` existed.
"""

from __future__ import annotations

from hpcbench.fl.engines.base import ClientEngine, ClientTasks, EngineJob
from hpcbench.fl.engines.batched import BatchedEngine
from hpcbench.fl.engines.numpy_engine import NumpyEngine
from hpcbench.fl.engines.sequential import SequentialEngine
from hpcbench.runtime.registry import Registry

__all__ = ["AUTO", "ENGINES", "ClientEngine", "ClientTasks", "EngineJob", "auto_engine", "server_engine"]

#: the ``client_training`` value that lets :func:`auto_engine` choose
AUTO = "auto"

#: engine name -> :class:`ClientEngine` subclass
ENGINES: Registry[type[ClientEngine]] = Registry("client-training engine", {
    "sequential": SequentialEngine,
    "batched": BatchedEngine,
    "numpy": NumpyEngine,
})


def auto_engine(job: EngineJob) -> str:
    """The engine ``client_training: auto`` runs ``job`` with.

    Of the engines with an ``auto_preference``, the lowest that
    :meth:`~ClientEngine.auto_accepts` the job; if none does, the last of
    them that has no :meth:`~ClientEngine.problems` with it (``sequential``:
    a model whose input kind is not known before it is built).

    Raises
    ------
    ValueError
        No such engine can train the job.
    """
    ranked = [name for _, name in sorted((e.auto_preference, name) for name, e in ENGINES.items()
                                         if e.auto_preference is not None)]
    for name in ranked:
        if ENGINES[name].auto_accepts(job):
            return name
    for name in reversed(ranked):
        if not ENGINES[name].problems(job):
            return name
    raise ValueError(f"client_training 'auto': no engine trains this job ({', '.join(ranked)} tried)")


def server_engine(job: EngineJob, engine: str) -> type[ClientEngine]:
    """The engine whose model kind the aggregator starts from and evaluates with.

    A torch-free engine that could train ``job`` wherever there is one
    (then the aggregator of a multi-rank job never imports torch, and its
    evaluation is the same computation at any world size), else ``engine``'s.
    """
    for candidate in ENGINES.values():
        if not candidate.needs_torch and not candidate.problems(job):
            return candidate
    return ENGINES[engine]

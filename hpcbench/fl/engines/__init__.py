"""Client-training engines; ``ENGINES`` maps ``client_training`` to a :class:`ClientEngine` class.

Torch-free at import. ``client_training: auto`` is :func:`auto_engine`: the
registered engine of lowest ``auto_preference`` that can train the job.
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
    """The engine ``client_training: auto`` runs ``job`` with: of those with an ``auto_preference``, the lowest
    that has no :meth:`~ClientEngine.problems` with it.

    Raises
    ------
    ValueError
        No such engine can train the job.
    """
    ranked = sorted((e.auto_preference, name) for name, e in ENGINES.items() if e.auto_preference is not None)
    for _, name in ranked:
        if not ENGINES[name].problems(job):
            return name
    raise ValueError(f"client_training 'auto': no engine trains this job ({', '.join(n for _, n in ranked)} tried)")


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

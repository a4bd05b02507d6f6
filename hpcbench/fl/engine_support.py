"""Which client-training engine trains which model: each engine's declared support, and ``auto``'s rule.

Torch-free (config validation reads it on every rank). Each torch engine
states what it supports in :data:`ENGINE_SUPPORT`; the numpy engine's
support is :meth:`hpcbench.fl.config.FLConfig.numpy_engine_problems` (it
depends on more than the model). ``client_training: auto`` takes, in
:data:`AUTO_ORDER`, the first engine that supports the job and lists the
job's input kind among its ``auto_input_kinds`` and the job's ``device``
among its ``auto_devices``: ``numpy``, then ``batched`` for image models
on ``device: cuda`` (a CNN client's step is a few kernels too small for a
GPU; vmapping the clients of an executor makes each one batched kernel),
then ``sequential``. On the CPU ``auto`` keeps image models on
``sequential``: vmapped convolutions become grouped ones, which the CPU
kernels do not run faster than one client after another (a first check on
a loaded 2-core machine, LEAF's CNN, 13 clients; not yet a benchmark:
``hpcbench fl-bench --client-training sequential,batched`` measures it). Feature models that the numpy engine cannot train
(compression, FLOPs pricing, FedBuff) stay on ``sequential`` under
``auto``, keeping the bits of versions before ``batched`` existed.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["EngineSupport", "ENGINE_SUPPORT", "AUTO_ORDER", "engine_problems", "auto_engine"]


@dataclass(frozen=True)
class EngineSupport:
    """What a torch engine trains.

    Attributes
    ----------
    input_kinds : tuple of str or None
        Model input kinds it trains (None: any).
    modes : tuple of str
        FL modes (``sync``, ``async``) it runs in.
    needs_functional : bool
        It trains only models whose step is a function of the parameters
        (:attr:`hpcbench.fl.models.ModelEntry.functional`).
    auto_input_kinds : tuple of str
        Input kinds for which ``auto`` picks it when it supports the job.
    auto_devices : tuple of str
        Values of ``device`` for which ``auto`` picks it.
    """

    input_kinds: tuple[str, ...] | None
    modes: tuple[str, ...]
    needs_functional: bool
    auto_input_kinds: tuple[str, ...]
    auto_devices: tuple[str, ...] = ("cpu", "cuda", "auto")


#: torch engine -> its support
ENGINE_SUPPORT = {
    "batched": EngineSupport(("features", "images"), ("sync",), True, ("images",), ("cuda",)),
    "sequential": EngineSupport(None, ("sync", "async"), False, ("features", "images", "tokens")),
}

#: the order in which ``auto`` tries engines
AUTO_ORDER = ("numpy", "batched", "sequential")


def engine_problems(engine: str, entry, input_kind: str | None, mode: str) -> list[str]:
    """Why torch engine ``engine`` cannot train the job (empty: it can).

    Parameters
    ----------
    engine : str
        A key of :data:`ENGINE_SUPPORT`.
    entry : hpcbench.fl.models.ModelEntry
        The model's registry entry.
    input_kind : str or None
        The input kind the model reads (the dataset's for a callable model; None when unknown yet).
    mode : str
    """
    support, problems = ENGINE_SUPPORT[engine], []
    if mode not in support.modes:
        problems.append(f"mode {mode!r} (needs {' or '.join(map(repr, support.modes))})")
    if support.input_kinds is not None and input_kind is not None and input_kind not in support.input_kinds:
        problems.append(f"a model reading {input_kind} (needs {' or '.join(support.input_kinds)})")
    if support.needs_functional and not entry.functional:
        problems.append("a model whose buffers change in training (BatchNorm's running statistics)")
    return problems


def auto_engine(entry, input_kind: str | None, mode: str, device: str, numpy_problems: list[str]) -> str:
    """The engine ``client_training: auto`` resolves to (see the module docstring)."""
    for engine in AUTO_ORDER:
        if engine == "numpy":
            if not numpy_problems:
                return engine
            continue
        support = ENGINE_SUPPORT[engine]
        if input_kind in support.auto_input_kinds and device in support.auto_devices \
                and not engine_problems(engine, entry, input_kind, mode):
            return engine
    return "sequential"

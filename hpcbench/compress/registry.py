"""Compressors by name: ``create("topk", ratio=0.01)``.

Adding a compressor is one new file (a :class:`~hpcbench.compress.base.Compressor`
subclass declaring its capabilities as class attributes) and one name in the
registration line below; runners, the compressed collectives and the tests read
the capabilities (``takes_ratio``, ``seeded``, ``approximates_topk``, ``kind``,
``ef_options``) from the class, never from lists of names.
"""

from __future__ import annotations

from hpcbench.compress.base import Compressor
from hpcbench.compress.bf16 import BF16Compressor
from hpcbench.compress.blockthreshold import BlockThresholdCompressor
from hpcbench.compress.dgc import DGCCompressor
from hpcbench.compress.efsignsgd import EFSignSGDCompressor
from hpcbench.compress.fp16 import FP16Compressor
from hpcbench.compress.none import NoneCompressor
from hpcbench.compress.powersgd import PowerSGDCompressor
from hpcbench.compress.qsgd import QSGDCompressor
from hpcbench.compress.randomk import RandomKCompressor
from hpcbench.compress.signsgd import SignSGDCompressor
from hpcbench.compress.terngrad import TernGradCompressor
from hpcbench.compress.threshold import ThresholdCompressor
from hpcbench.compress.thresholdv import ThresholdVCompressor
from hpcbench.compress.topk import TopKCompressor
from hpcbench.runtime.registry import Registry

__all__ = ["REGISTRY", "register", "create", "names", "compressor_class", "build"]

REGISTRY: Registry[type[Compressor]] = Registry("compressor")


def register(name: str, cls: type[Compressor]) -> None:
    """Register the Compressor subclass ``cls`` under ``name``.

    Raises
    ------
    ValueError
        ``name`` is taken.
    TypeError
        ``cls`` is not a Compressor subclass (its capabilities are read from the class).
    """
    if not (isinstance(cls, type) and issubclass(cls, Compressor)):
        raise TypeError(f"register({name!r}, ...) needs a Compressor subclass, got {cls!r}")
    REGISTRY.register(name, cls)


for _cls in (NoneCompressor, FP16Compressor, BF16Compressor, TopKCompressor, RandomKCompressor,
             ThresholdCompressor, ThresholdVCompressor, BlockThresholdCompressor, DGCCompressor,
             QSGDCompressor, TernGradCompressor, SignSGDCompressor, EFSignSGDCompressor,
             PowerSGDCompressor):
    register(_cls.name, _cls)


def names() -> list[str]:
    """Registered names, in registration order."""
    return list(REGISTRY)


def create(name: str, **kwargs) -> Compressor:
    """Instantiate the compressor registered as ``name`` with ``kwargs``.

    Raises
    ------
    hpcbench.runtime.registry.UnknownName
        If ``name`` is unknown (the message lists the known names).
    ValueError
        An argument is invalid.
    """
    return compressor_class(name)(**kwargs)


def compressor_class(name: str) -> type[Compressor]:
    """The class registered as ``name`` (its capabilities, without building one).

    Raises
    ------
    hpcbench.runtime.registry.UnknownName
        If ``name`` is unknown; the message lists the known names.
    """
    return REGISTRY[name]


def build(name: str, ratio: float | None = None, seed: int | None = None, **options) -> Compressor:
    """:func:`create` ``name``, passing each common option only to compressors that take it.

    Parameters
    ----------
    name : str
        Registered name.
    ratio : float, optional
        Fraction kept; passed when the class has ``takes_ratio``.
    seed : int, optional
        Per-rank rounding seed; passed when the class is ``seeded``.
    **options
        Passed as given (method-specific options).
    """
    cls = compressor_class(name)
    if ratio is not None and cls.takes_ratio:
        options["ratio"] = ratio
    if seed is not None and cls.seeded:
        options["seed"] = seed
    return cls(**options)

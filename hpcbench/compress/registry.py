"""Compressors by name: ``create("topk", compress_ratio=0.01)``."""

from __future__ import annotations

from typing import Callable

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

__all__ = ["REGISTRY", "register", "create", "names"]

REGISTRY: dict[str, Callable[..., Compressor]] = {}


def register(name: str, factory: Callable[..., Compressor]) -> None:
    """Register ``factory`` (class or callable returning a Compressor) under ``name``."""
    if name in REGISTRY:
        raise ValueError(f"compressor name {name!r} already registered")
    REGISTRY[name] = factory


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
    ValueError
        If ``name`` is unknown (the message lists the known names) or an
        argument is invalid.
    """
    try:
        factory = REGISTRY[name]
    except KeyError:
        raise ValueError(f"unknown compressor {name!r}; choose from {', '.join(REGISTRY)}") from None
    return factory(**kwargs)

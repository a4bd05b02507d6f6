"""Config sections of compressed client updates (``uplink_compression``, ``downlink_compression``).

A section names any compressor of the :mod:`hpcbench.compress` registry; the
allowed names are the registry's, and a section is checked by building its
compressor once on a small tensor, so a bad option is a :class:`ConfigError`
naming the key and the value before any rank starts training.
"""

from __future__ import annotations

from pydantic import Field, model_validator

from hpcbench.compress.config import CompressorConfig

__all__ = ["CompressionConfig", "UplinkCompressionConfig", "build_compressor"]


def build_compressor(section, seed: int):
    """The compressor a section names, with its options (``ValueError``/``TypeError`` on bad ones).

    ``ratio`` (the kept fraction) is passed to compressors that take it and
    ``seed`` to seeded ones (:meth:`hpcbench.compress.config.CompressorConfig.build`).
    """
    return section.build(seed)


class CompressionConfig(CompressorConfig):
    """One direction's compression: ``name`` from the compressor registry, ``ratio`` and ``options``.

    Only compressors whose payload size depends on the tensor's shape alone
    (``fixed_size``) are accepted: the virtual clock times a round before its
    clients train, so it must know the wire bytes in advance.
    """

    @model_validator(mode="after")
    def _check(self):
        if self.name == "none" and self.ratio is None and not self.options:
            return self  # uncompressed: nothing to probe (and no torch to import)
        import torch

        from hpcbench.compress.registry import REGISTRY

        cls = REGISTRY[self.name]
        if not cls.fixed_size:
            raise ValueError(f"name: compressor {self.name!r} has a value-dependent payload size; the "
                             f"virtual clock needs sizes known before training (use a fixed-size one)")
        try:
            comp = build_compressor(self, 0)
            probe = torch.linspace(-1.0, 1.0, 64).reshape(8, 8)
            comp.decompress(*comp.compress(probe, "probe"))
        except Exception as exc:  # noqa: BLE001 - any failure of the user's options is a config error
            raise ValueError(f"options: {dict(self.options)!r} rejected by compressor {self.name!r}: {exc}") \
                from None
        return self

    @property
    def enabled(self) -> bool:
        """False for ``none`` (the uncompressed path is taken as is)."""
        return self.name != "none"


class UplinkCompressionConfig(CompressionConfig):
    """Client-to-server compression, with client-side error feedback.

    ``error_feedback`` keeps each participating client's residual (Stich et
    al., NeurIPS 2018; Karimireddy et al., ICML 2019); at most
    ``max_residuals`` clients keep one (least recently used evicted), so the
    memory is bounded by ``max_residuals x parameters x 4`` bytes.
    """

    error_feedback: bool = Field(True, description="keep per-client residuals (error feedback)")
    max_residuals: int = Field(10_000, ge=1, le=100_000_000,
                               description="clients whose residuals are kept (LRU); bounds memory")

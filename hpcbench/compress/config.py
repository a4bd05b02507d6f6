"""The config section naming a compressor: ``{name: topk, ratio: 0.01, options: {...}}`` (or just ``topk``).

Validating a section imports the compressor registry (and torch) only when
it names a compressor other than ``none``, so a config that compresses
nothing stays torch-free.
"""

from __future__ import annotations

from typing import Optional, Union

from pydantic import Field, field_validator, model_validator

from hpcbench.runtime.config import Strict

__all__ = ["CompressorConfig"]

_Scalar = Union[bool, int, float, str]


class CompressorConfig(Strict):
    """A compressor of the :mod:`hpcbench.compress` registry, its kept fraction and its other options.

    ``ratio`` is the fraction of elements KEPT (GRACE's top-k takes the same quantity),
    passed to compressors that take one (``takes_ratio``); unset, the
    compressor's own default (0.01 for every sparsifier). It is the
    section's own key, never one of ``options`` (an option under its old
    name is refused naming ``ratio``: :mod:`hpcbench.runtime.renamed`).
    """

    name: str = Field("none", description="compressor from hpcbench.compress (none: uncompressed)")
    ratio: Optional[float] = Field(None, gt=0, le=1, description="fraction of elements kept, for compressors that "
                                                                 "take one (default: the compressor's, 0.01)")
    options: dict[str, _Scalar] = Field(default_factory=dict, description="other constructor options of the "
                                                                         "compressor")

    @field_validator("name")
    @classmethod
    def _registered(cls, v):
        if v == "none":
            return v        # uncompressed: no registry (and no torch) to import
        from hpcbench.compress.registry import REGISTRY

        return REGISTRY.check(v)

    @field_validator("options")
    @classmethod
    def _ratio_not_an_option(cls, v):
        from hpcbench.runtime.renamed import RENAMED_OPTIONS, retired_key

        for old, new in RENAMED_OPTIONS.items():
            if old in v:
                raise ValueError(retired_key(f"options.{old}", f"{new} (this section's own key)"))
        if "ratio" in v:
            raise ValueError("options.ratio: the kept fraction is this section's own key ratio, not an option")
        return v

    @model_validator(mode="after")
    def _ratio(self):
        if self.ratio is not None:
            from hpcbench.compress.registry import REGISTRY

            if not REGISTRY[self.name].takes_ratio:
                raise ValueError(f"ratio: compressor {self.name!r} takes no ratio (got {self.ratio!r})")
        return self

    def build(self, seed: int | None = None):
        """A new compressor of this section (``seed``: the per-rank rounding seed of seeded compressors).

        Raises
        ------
        ValueError, TypeError
            An option the compressor refuses.
        """
        from hpcbench.compress.registry import build

        return build(self.name, ratio=self.ratio, seed=seed, **dict(self.options))

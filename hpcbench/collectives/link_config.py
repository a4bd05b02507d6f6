"""The config section of a modelled link, shared by every runner that runs over one (train, pipeline).

One section, one validation: ``bandwidth`` is parsed (a positive, finite
rate) and ``latency_s`` checked whatever ``kind`` is, so a bad value is an
input error naming the key even where it is not used yet, never a
traceback at run time nor silently ignored.
"""

from __future__ import annotations

from typing import Literal, Optional

from pydantic import Field, field_validator

from hpcbench.runtime.config import Strict

__all__ = ["LinkConfig"]


class LinkConfig(Strict):
    """The links hpcbench's collectives run over: ``shared`` (MPI over shared memory) or ``model``.

    ``model``: every message takes ``latency_s + 8 bytes / bandwidth``
    (:class:`hpcbench.collectives.linkmodel.LinkTransport`), or follows row
    ``trace_index`` of the bundled MobiPerf speed tests (kbit/s samples times
    ``trace_scale``, one per ``trace_interval_s``) where the runner replays
    traces (train; the pipeline's links are constant-rate).
    """

    kind: Literal["shared", "model"] = "shared"
    latency_s: float = Field(0.0, ge=0.0, le=3600.0, description="per-message latency in seconds (model links)")
    bandwidth: str = Field("10Gbit", description="constant bandwidth, e.g. 10Gbit, 1Gbit, 100Mbit (model links)")
    trace_index: Optional[int] = Field(None, ge=0, description="MobiPerf trace row (time-varying bandwidth)")
    trace_scale: float = Field(1.0, gt=0.0)
    trace_interval_s: float = Field(1.0, gt=0.0)

    @field_validator("bandwidth")
    @classmethod
    def _rate(cls, v):
        from hpcbench.collectives.linkmodel import parse_rate

        parse_rate(v)
        return v

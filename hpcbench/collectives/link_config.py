"""The config section of a modelled link, shared by every runner that runs over one (train, pipeline).

One section, one validation: ``bandwidth`` is parsed (a positive, finite
rate) and ``latency_s`` checked whatever ``kind`` is, so a bad value is an
input error naming the key even where it is not used yet, never a
traceback at run time nor silently ignored.
"""

from __future__ import annotations

from typing import Literal, Optional

from pydantic import Field, field_validator, model_validator

from hpcbench.runtime.config import Strict

__all__ = ["LinkConfig", "SlowLinkConfig"]


class SlowLinkConfig(Strict):
    """One injected slow link: rank ``rank``'s outgoing link takes ``factor`` times as long from step ``from_step``
    of each run on (:class:`hpcbench.collectives.linkmodel.SlowLink`; KungFu's figure 5 interference)."""

    rank: int = Field(ge=0, description="the rank whose outgoing link slows")
    from_step: int = Field(ge=0, description="the first step (of each run, from 0) with the slow link")
    factor: float = Field(ge=1.0, le=1e6, description="transfer times multiplied by this (bandwidth divided by it; "
                                                      "1: the link is back to its normal speed)")


class LinkConfig(Strict):
    """The links hpcbench's collectives run over: ``shared`` (MPI over shared memory) or ``model``.

    ``model``: every message takes ``latency_s + 8 bytes / bandwidth``
    (:class:`hpcbench.collectives.linkmodel.LinkTransport`), or follows row
    ``trace_index`` of the bundled MobiPerf speed tests (kbit/s samples times
    ``trace_scale``, one per ``trace_interval_s``), or the MobiPerf WAN
    replay scaled to ``wan_mean`` (:meth:`hpcbench.collectives.linkmodel.BandwidthReplay.mobiperf_wan`),
    where the runner replays traces (train; the pipeline's links are
    constant-rate). ``slow`` injects slow links from a given step (train):
    rank ``rank``'s transfers take ``factor`` times as long from its step
    ``from_step`` on, until a later entry of the same rank
    (:class:`hpcbench.collectives.linkmodel.SlowLink`);
    ranks beyond the job's are refused by the runner. ``scope`` says which
    messages the model charges: ``all``, or ``between_hosts`` (the two-level
    model: messages inside a host go through MPI's shared memory as they
    are, those between ranks of different hosts take the modelled link;
    :class:`hpcbench.collectives.linkmodel.LinkTransport` ``scope``); the
    training runner then prices allreduces with
    :func:`hpcbench.collectives.linkcost.predict_allreduce_hosts` on the
    job's host layout.
    """

    kind: Literal["shared", "model"] = "shared"
    latency_s: float = Field(0.0, ge=0.0, le=3600.0, description="per-message latency in seconds (model links)")
    bandwidth: str = Field("10Gbit", description="constant bandwidth, e.g. 10Gbit, 1Gbit, 100Mbit (model links)")
    trace_index: Optional[int] = Field(None, ge=0, description="MobiPerf trace row (time-varying bandwidth)")
    trace_scale: float = Field(1.0, gt=0.0)
    trace_interval_s: float = Field(1.0, gt=0.0, description="modelled seconds each trace sample lasts")
    wan_mean: Optional[str] = Field(None, description="a fluctuating wide-area link: the MobiPerf speed tests' "
                                                      "means in turn, scaled to this mean, e.g. 100Mbit or 500Mbit "
                                                      "(StellaTrain's settings); one per trace_interval_s (train)")
    scope: Literal["all", "between_hosts"] = Field("all", description=(
        "which messages take the modelled link: all, or between_hosts (inside a host shared memory, between "
        "hosts the modelled link: the two-level model; train)"))
    slow: list[SlowLinkConfig] = Field([], description="injected slow links (model links, train): "
                                                       "[{rank: R, from_step: S, factor: F}]")

    @model_validator(mode="after")
    def _one_trace(self):
        if self.wan_mean is not None and self.trace_index is not None:
            raise ValueError(f"wan_mean: {self.wan_mean!r} and trace_index: {self.trace_index} both set the "
                             f"link's bandwidth over time; give one")
        if self.slow and self.kind != "model":
            raise ValueError(f"slow: {[s.model_dump() for s in self.slow]} slows modelled links; give kind: model")
        if self.scope != "all" and self.kind != "model":
            raise ValueError(f"scope: {self.scope!r} says which messages the modelled link charges; give kind: model")
        seen = set()
        for i, e in enumerate(self.slow):
            if (e.rank, e.from_step) in seen:
                raise ValueError(f"slow.{i}: rank {e.rank} has two entries from step {e.from_step}; give one")
            seen.add((e.rank, e.from_step))
        return self

    @field_validator("bandwidth", "wan_mean")
    @classmethod
    def _rate(cls, v):
        from hpcbench.collectives.linkmodel import parse_rate

        if v is not None:
            parse_rate(v)
        return v

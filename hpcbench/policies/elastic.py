"""``elastic``: the number of active workers on a step schedule (KungFu's figure 7 schedule).

KungFu's elastic examples (``examples/`` and the OSDI'20 artifact's
"Scaling Performance (Figure 7)") resize the cluster at fixed steps of a
schedule, through ``ResizeClusterFromURL`` at the end of a step. This policy
keeps that rule in hpcbench's policy contract: key ``k`` of the schedule
holds from step ``k`` on (counting from 0, as ``batch_schedule``), decided in
``after_step`` of step ``k - 1`` and applied by the runner before step ``k``
(``hpcbench/train/adaptation/elastic.py``); key 0 is the worker count of the first step
(the runner starts with it, so it costs no resize). Every rank decides the
same from the step count (``agreement: consensus``).
"""

from __future__ import annotations

from typing import Annotated

from pydantic import BeforeValidator, Field, PositiveInt

from hpcbench.policies.base import Policy, PolicyConfig, PolicyContext
from hpcbench.policies.batch_schedule import parse_schedule
from hpcbench.policies.decision import Decision

__all__ = ["ElasticSchedule"]


class ElasticSchedule(Policy):
    """Active worker count from a step schedule (``{0: 1, 50: 2, 100: 4}`` or ``"0:1, 50:2, 100:4"``)."""

    class Config(PolicyConfig):
        """The schedule: ``{STEP: workers}`` or ``"STEP:workers, ..."``."""

        schedule: Annotated[dict[Annotated[int, Field(ge=0)], PositiveInt], BeforeValidator(parse_schedule)] = Field(
            ..., description="active workers from each step on, e.g. '0:1, 50:2, 100:4, 150:2'")

    name = "elastic"
    decides = frozenset({"workers"})
    agreement = "consensus"

    def _at(self, key: int) -> Decision | None:
        n = self.config.schedule.get(key)
        return None if n is None else Decision(workers=n, reason=f"step {key} of the schedule")

    def before_train(self, ctx: PolicyContext) -> Decision | None:
        n = self.config.schedule.get(0)
        return None if n is None or n == ctx.world_size else self._at(0)

    def after_step(self, ctx: PolicyContext, telemetry) -> Decision | None:
        return self._at(ctx.step + 1)

"""``batch_schedule``: the batch size (and optionally the learning rate) on a step or epoch schedule.

KungFu's ``ScheduledBatchSizePolicy`` (``srcs/python/kungfu/tensorflow/
policy/scheduled_batch_size_policy.py``) counts the steps it has seen in
``after_step`` and, when the count is a key of its schedule, sets the batch
size to that key's value: key ``k`` holds from the ``k``-th step (counting
from 0) on. hpcbench keeps that rule and adds what KungFu's example leaves
out: a schedule in epochs (key ``e`` holds from the first step of epoch
``e``, KungFu's ``PolicyHook`` epochs: ``trained_samples // epoch_size``),
a key 0 (the batch from the start), and an optional learning rate on the
same keys.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BeforeValidator, Field, PositiveFloat, PositiveInt, model_validator

from hpcbench.policies.base import Policy, PolicyConfig, PolicyContext
from hpcbench.policies.decision import Decision

__all__ = ["BatchSchedule", "parse_schedule"]


def parse_schedule(value):
    """``"0:32, 100:64"`` -> ``{0: 32, 100: 64}``; a mapping is returned as it is (values parsed by pydantic).

    Raises
    ------
    ValueError
        A string entry that is not ``KEY:VALUE`` with an integer key.
    """
    if not isinstance(value, str):
        return value
    out = {}
    for item in filter(None, (s.strip() for s in value.split(","))):
        key, colon, val = item.partition(":")
        try:
            k = int(key)
            v = float(val) if "." in val or "e" in val.lower() else int(val)
        except ValueError:
            raise ValueError(f"{item!r} is not KEY:VALUE (e.g. '100:64')") from None
        if not colon:
            raise ValueError(f"{item!r} is not KEY:VALUE (e.g. '100:64')")
        out[k] = v
    return out


_Keys = Annotated[int, Field(ge=0)]


class BatchSchedule(Policy):
    """Per-worker batch size (and learning rate) from a schedule of steps or epochs (KungFu's scheduled policy).

    At each scheduled key the policy decides ``batch_size`` (and
    ``learning_rate`` where the learning-rate schedule has the key), to take
    effect before step ``k`` (``unit: step``) or before the first step of
    epoch ``k`` (``unit: epoch``); key 0 takes effect from the first step.
    Every rank decides the same from the step count or the epoch alone
    (``agreement: consensus``, checked by the runner).
    """

    class Config(PolicyConfig):
        """The schedule: ``{KEY: batch}`` or ``"KEY:batch, ..."`` in steps or epochs."""

        unit: Literal["step", "epoch"] = Field("step", description="schedule keys count steps (KungFu) or epochs")
        batch_size: Annotated[dict[_Keys, PositiveInt], BeforeValidator(parse_schedule)] = Field(
            default_factory=dict, description="samples per worker from each key on, e.g. {0: 32, 100: 64} or "
                                              "'0:32, 100:64'")
        learning_rate: Annotated[dict[_Keys, PositiveFloat], BeforeValidator(parse_schedule)] = Field(
            default_factory=dict, description="learning rate from each key on (optional; same keys or others)")

        @model_validator(mode="after")
        def _something(self):
            if not self.batch_size and not self.learning_rate:
                raise ValueError("batch_size: give a schedule (e.g. {0: 32, 100: 64}), or a learning_rate one")
            return self

        def needs_epochs(self) -> bool:
            return self.unit == "epoch" and any(k > 0 for k in [*self.batch_size, *self.learning_rate])

    name = "batch_schedule"
    decides = frozenset({"batch_size", "learning_rate"})
    agreement = "consensus"

    def _at(self, key: int) -> Decision | None:
        """The decision scheduled at ``key`` (None: nothing there)."""
        b, lr = self.config.batch_size.get(key), self.config.learning_rate.get(key)
        if b is None and lr is None:
            return None
        return Decision(batch_size=b, learning_rate=lr, reason=f"{self.config.unit} {key} of the schedule")

    def before_train(self, ctx: PolicyContext) -> Decision | None:
        return self._at(0)

    def after_step(self, ctx: PolicyContext, telemetry) -> Decision | None:
        if self.config.unit == "step":
            return self._at(ctx.step + 1)       # KungFu: after the k-th trained step, key k
        return None

    def after_epoch(self, ctx: PolicyContext) -> Decision | None:
        if self.config.unit == "epoch":
            return self._at(ctx.epoch)          # the epoch that starts with the next step
        return None


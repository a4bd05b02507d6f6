"""What a policy returns: a typed :class:`Decision`, or a :class:`Vote` that the loop sums over ranks.

A decision names new values for what the runner can change between steps
(KungFu's adaptation: batch size, learning rate, synchroniser, allreduce
algorithm, worker count; StellaTrain's: per-worker batch sizes and the
compression ratio) and the step from which they hold. The runner makes
it collective (every rank applies the same decision before the same step)
and applies it; a policy never does either itself.
"""

from __future__ import annotations

import hashlib
import json
import math
from dataclasses import asdict, dataclass, fields, is_dataclass
from typing import Any, Mapping

__all__ = ["Decision", "Vote", "FIELDS"]


@dataclass(frozen=True)
class Decision:
    """New values from a step on (only the fields given change).

    Attributes
    ----------
    batch_size : int or tuple of int, optional
        Samples per worker per step: one int for every worker, or one per
        worker in rank order (StellaTrain's per-worker batches).
    learning_rate : float, optional
        The SGD learning rate, > 0.
    sync : str or mapping, optional
        The synchroniser to switch to: a registered name or a ``sync`` entry's
        section (``{name: ring}``, ``{name: sma, alpha: 0.1}``).
    algorithm : str or mapping, optional
        The allreduce algorithm of the active synchroniser (a registered name
        or ``auto``), or a mapping of its name and options
        (``{"name": "weighted_shards", "weights": (0.0, 1, 1, 1)}``), for
        synchronisers that can switch it.
    workers : int, optional
        Active workers, >= 1 (an elastic worker set; refused by runners that
        have none).
    ratio : float, optional
        Fraction of gradient elements the compressed synchroniser keeps, in
        (0, 1] (StellaTrain's compression rate is ``1 -`` this).
    at_step : int, optional
        The step of the run (from 0) before which the decision takes effect;
        None: the next step. It must come after the step in which the
        decision is made.
    reason : str
        Why, for the record (``decisions`` table).
    detail : dataclass instance, optional
        The policy's own record of the decision (a dataclass whose fields
        carry units, :func:`hpcbench.results.records.columns_of`), written by
        the runner to the table the policy names (``Policy.detail_table``);
        not a change.

    Raises
    ------
    ValueError
        A value out of range, or no field set.
    """

    batch_size: int | tuple | None = None
    learning_rate: float | None = None
    sync: str | Mapping | None = None
    algorithm: str | Mapping | None = None
    workers: int | None = None
    ratio: float | None = None
    at_step: int | None = None
    reason: str = ""
    detail: Any = None

    def __post_init__(self) -> None:
        b = self.batch_size
        if b is not None:
            sizes = b if isinstance(b, tuple) else (b,)
            if not sizes or not all(_positive_int(x) for x in sizes):
                raise ValueError(f"batch_size: {b!r} is not a positive int or a tuple of them")
        lr = self.learning_rate
        if lr is not None and not (isinstance(lr, (int, float)) and not isinstance(lr, bool)
                                   and math.isfinite(lr) and lr > 0):
            raise ValueError(f"learning_rate: {lr!r} is not a finite number > 0")
        cr = self.ratio
        if cr is not None and not (isinstance(cr, (int, float)) and not isinstance(cr, bool) and 0 < cr <= 1):
            raise ValueError(f"ratio: {cr!r} is not a number in (0, 1]")
        if self.workers is not None and not _positive_int(self.workers):
            raise ValueError(f"workers: {self.workers!r} is not a positive int")
        if self.at_step is not None and not (_positive_int(self.at_step) or self.at_step == 0):
            raise ValueError(f"at_step: {self.at_step!r} is not an int >= 0")
        if not self.changes():
            raise ValueError("a decision changes at least one of " + ", ".join(FIELDS))

    def changes(self) -> dict[str, Any]:
        """``{field: value}`` of the fields this decision sets (of :data:`FIELDS`)."""
        return {f: getattr(self, f) for f in FIELDS if getattr(self, f) is not None}

    def digest(self) -> bytes:
        """8 bytes identifying the decision (BLAKE2b of its canonical JSON), for checking that ranks agree."""
        text = json.dumps({f.name: _plain(getattr(self, f.name)) for f in fields(self)}, sort_keys=True)
        return hashlib.blake2b(text.encode(), digest_size=8).digest()


@dataclass(frozen=True)
class Vote:
    """One rank's vote; the loop sums the votes of every rank and gives the total to the policy's ``tally``
    (KungFu's interference strategy: each worker votes 1 when its throughput fell, and the strategy switches
    when the allreduce-sum exceeds half the workers).

    Attributes
    ----------
    value : float
        This rank's vote (1.0, 0.0, or any weight).
    """

    value: float = 1.0


#: the fields a decision may set (runners register an applier for each they support)
FIELDS = ("batch_size", "learning_rate", "sync", "algorithm", "workers", "ratio")


def _positive_int(x) -> bool:
    return isinstance(x, int) and not isinstance(x, bool) and x > 0


def _plain(value):
    """JSON-able form of a decision's value (sections and mappings as sorted dicts)."""
    if hasattr(value, "model_dump"):
        return value.model_dump(mode="json")
    if is_dataclass(value) and not isinstance(value, type):
        return _plain(asdict(value))
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, tuple):
        return [_plain(v) for v in value]
    if isinstance(value, float):
        return repr(value)
    return value

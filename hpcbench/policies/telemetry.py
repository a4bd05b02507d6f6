"""One training step's telemetry, as the step loop hands it to its hooks and policies.

Runners fill it (the training runner's step loop, :mod:`hpcbench.train.steps.loop`);
policies and other hooks read it. It holds numbers only: no communicator, no
model, nothing a policy could use to communicate behind the loop's back.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

import numpy as np

__all__ = ["Telemetry"]


@dataclass(frozen=True)
class Telemetry:
    """What one step measured, on one rank.

    Attributes
    ----------
    step : int
        Step of the run, from 0.
    epoch : int
        Epoch of the step's first sample (0 when the data has no epochs).
    fields : tuple of str
        Names of the per-rank numbers (the training runner's
        ``hpcbench.train.reporting.tables.STEP_FIELDS``: ``compute_s``, ``comm_span_s``,
        ``exposed_s``, ``monitor_s``, ``step_s`` in modelled seconds,
        ``loss``, ``local_sq_norm``; then, with telemetry, the fields of
        :class:`hpcbench.telemetry.TelemetryRecord`, see :meth:`records`).
    local : ndarray of shape (len(fields),), float64
        This rank's numbers.
    ranks : ndarray of shape (world_size, len(fields)), float64, or None
        Every rank's numbers (row ``r``: rank ``r``), where the runner
        gathered them: on rank 0 always, on every rank when a policy declares
        ``needs_all_ranks``; None elsewhere.
    monitors : mapping of str to float
        Outputs of the monitors that observed this step (``gns_noise_scale``...;
        the same on every rank), empty at other steps.
    batch_sizes : tuple of int
        Every worker's batch size in this step.
    """

    step: int
    epoch: int
    fields: tuple
    local: np.ndarray
    ranks: np.ndarray | None
    monitors: Mapping[str, float]
    batch_sizes: tuple

    def __getitem__(self, name: str) -> float:
        """This rank's value of field ``name``.

        Raises
        ------
        KeyError
            Not a field.
        """
        return float(self.local[self._index(name)])

    def column(self, name: str) -> np.ndarray:
        """Every rank's value of field ``name``, shape ``(world_size,)``.

        Raises
        ------
        KeyError
            Not a field.
        ValueError
            This rank was not given every rank's numbers (``ranks`` is None).
        """
        if self.ranks is None:
            raise ValueError(f"telemetry of step {self.step}: every rank's numbers were not gathered here "
                             f"(a policy that reads them declares needs_all_ranks)")
        return self.ranks[:, self._index(name)]

    def records(self) -> list:
        """StellaTrain's per-rank records of this step (:class:`hpcbench.telemetry.TelemetryRecord`), where the
        runner measured them (its ``fields`` then end with the record's): every rank's, in rank order, where
        ``ranks`` is given, else this rank's alone; empty without telemetry."""
        from hpcbench.telemetry import TelemetryRecord

        names = TelemetryRecord.names()
        if names[0] not in self.fields:
            return []
        k = self.fields.index(names[0])
        rows = self.ranks if self.ranks is not None else self.local[None, :]
        return [TelemetryRecord.from_vector(r[k:k + len(names)]) for r in rows]

    @property
    def global_batch(self) -> int:
        """Samples of this step over all workers."""
        return int(sum(self.batch_sizes))

    def _index(self, name: str) -> int:
        try:
            return self.fields.index(name)
        except ValueError:
            raise KeyError(f"no telemetry field {name!r}; fields: {', '.join(self.fields)}") from None

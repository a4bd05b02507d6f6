"""What one training step on one rank records (real and emulated workers alike).

Times are read on the run's clock (:meth:`hpcbench.runtime.dilation.TimeDilation.now`:
modelled seconds, wall seconds divided by the dilation factor).

Per step, on this rank:

``compute_s``
    forward + backward + optimizer (real: measured, including the hooks'
    copies into the buckets; emulated: the profiled times, as slept).
``comm_span_s``
    from the start of the first bucket's reduction (model averaging: of the
    model's) to the completion of the last.
``exposed_s``
    time spent after backward waiting for the reductions: the part of the
    communication not hidden behind backward (``hidden = 1 - exposed / span``).
``monitor_s``
    time in the monitors' ``observe``.
``step_s``
    the whole step.
``sent_bytes``, ``link_busy_s``
    payload bytes this rank's transport sent during the step (over the
    modelled link: with ``link.scope: between_hosts`` only those to other
    hosts), and the modelled time its outgoing link spent transmitting them
    (undilated seconds; NaN without a modelled link): ``link_busy_s /
    sent_bytes`` is the link's measured time per byte (filled by the step
    loop).
``policy_calls_s``, ``policy_agree_s``
    the policies' machinery of the previous step on this rank (filled by the
    step loop; 0 without policies): its hook calls, and its agreement
    exchange (which includes waiting for the ranks that arrive later).
``telemetry_s``
    time in the telemetry hook since the last step's numbers (its table
    rows and this step's record; 0 without telemetry).
``start_s``, ``forward_s``, ``backward_s``, ``optimizer_s``, ``intra_fwd_gap_s``
    when the step started (the run's clock), its forward and backward
    compute, the optimizer's, and the time the forward spent waiting for
    parameters (``schedule: priority``); kept on the rank for its telemetry
    (:mod:`hpcbench.train.reporting.telemetryhook`), not gathered.

Wrapped synchronisers (``ddp``, ``horovod``) reduce inside backward or the
optimizer step, out of the runner's sight: only ``step_s`` is measured and
the others are NaN.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

__all__ = ["StepRecord"]


@dataclass
class StepRecord:
    """One step on one rank (modelled seconds; see the module docstring)."""

    compute_s: float = math.nan
    comm_span_s: float = math.nan
    exposed_s: float = math.nan
    monitor_s: float = 0.0
    step_s: float = math.nan
    loss: float = math.nan
    local_sq_norm: float = math.nan
    sent_bytes: float = math.nan
    link_busy_s: float = math.nan
    policy_calls_s: float = 0.0
    policy_agree_s: float = 0.0
    telemetry_s: float = 0.0
    monitor_values: dict = field(default_factory=dict)
    start_s: float = math.nan
    forward_s: float = math.nan
    backward_s: float = math.nan
    optimizer_s: float = math.nan
    intra_fwd_gap_s: float = 0.0

    def vector(self) -> np.ndarray:
        """The numbers the ranks gather, in a fixed order."""
        return np.array([self.compute_s, self.comm_span_s, self.exposed_s, self.monitor_s, self.step_s,
                         self.loss, self.local_sq_norm, self.sent_bytes, self.link_busy_s, self.policy_calls_s, self.policy_agree_s,
                         self.telemetry_s], dtype=np.float64)

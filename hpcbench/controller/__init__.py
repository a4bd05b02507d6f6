"""StellaTrain's controller maths (Lim et al., SIGCOMM'24), without MPI: typed inputs, typed outputs.

==========================  ================================================================
module                      what
==========================  ================================================================
:mod:`.bandwidth`           :class:`BandwidthEstimator`: StellaTrain's bandwidth estimate
:mod:`.delivered`           :class:`DeliveredBandwidthEstimator`: the link's delivered rate
:mod:`.estimators`          :data:`ESTIMATORS`: the estimators by name
:mod:`.throughput`          :class:`ThroughputModel` ``f(x) = min(beta/alpha x, beta)``, its fit
:mod:`.batch`               batch sizes: the objective, solvers ``nelder-mead`` and ``exact``
:mod:`.rate`                :class:`WireModel`, the compression-rate binary search
:mod:`.timing`              :class:`DecisionTiming` (StellaTrain's constants), :class:`DecisionClock`
:mod:`.controller`          :class:`Controller`: telemetry records in, :class:`Decision` out
==========================  ================================================================

A training policy gathers each step's :class:`hpcbench.telemetry.TelemetryRecord`
from every rank to one rank, feeds :meth:`Controller.observe`, broadcasts a
returned :class:`Decision` and applies it from its ``effective_step``.
"""

from hpcbench.controller.bandwidth import BandwidthEstimate, BandwidthEstimator
from hpcbench.controller.batch import BATCH_SOLVERS, BatchAllocation, BatchProblem, objective, solve_batch_sizes
from hpcbench.controller.controller import Controller, Decision
from hpcbench.controller.delivered import DeliveredBandwidthEstimator
from hpcbench.controller.estimators import ESTIMATORS
from hpcbench.controller.rate import RateDecision, WireModel, modelled_step_s, search_compression_rate
from hpcbench.controller.throughput import ThroughputHistory, ThroughputModel, fit_throughput
from hpcbench.controller.timing import STELLATRAIN_TIMING, DecisionClock, DecisionTiming

__all__ = ["BandwidthEstimate", "BandwidthEstimator", "DeliveredBandwidthEstimator", "ESTIMATORS", "BATCH_SOLVERS", "BatchAllocation", "BatchProblem",
           "objective", "solve_batch_sizes", "Controller", "Decision", "RateDecision", "WireModel",
           "modelled_step_s", "search_compression_rate", "ThroughputHistory", "ThroughputModel", "fit_throughput",
           "STELLATRAIN_TIMING", "DecisionClock", "DecisionTiming"]

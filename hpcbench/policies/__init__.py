"""Adaptation policies (KungFu, OSDI'20): what a training loop's hooks see of each step.

This package is core: it imports no runner and no MPI.
"""

from hpcbench.policies.telemetry import Telemetry

__all__ = ["Telemetry"]

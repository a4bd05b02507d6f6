"""Adaptation policies (KungFu, OSDI'20): hooks of a training loop that return decisions.

A policy is one file here and one line in :data:`POLICIES`; a job names its
policies in its config (``policies: [{name: batch_schedule, ...}]``, each
entry that policy's own ``Config`` section). The contract is
:class:`~hpcbench.policies.base.Policy` (KungFu's six hooks, called on every
rank with a :class:`~hpcbench.policies.base.PolicyContext` and the step's
:class:`~hpcbench.policies.telemetry.Telemetry`); a hook returns a
:class:`~hpcbench.policies.decision.Decision` or
:class:`~hpcbench.policies.decision.Vote`, which the runner makes collective
and applies (``hpcbench/train/adaptation/policyhook.py``). This package is core: it
imports no runner and no MPI.
"""

from hpcbench.policies.base import Policy, PolicyConfig, PolicyContext, PolicyError
from hpcbench.policies.batch_schedule import BatchSchedule
from hpcbench.policies.decision import FIELDS, Decision, Vote
from hpcbench.policies.elastic import ElasticSchedule
from hpcbench.policies.gns_batch import GnsBatch
from hpcbench.policies.interference import Interference
from hpcbench.policies.provisioning import Provisioning
from hpcbench.policies.sync_switch import SyncSwitch
from hpcbench.policies.stellatrain import StellaTrain
from hpcbench.policies.telemetry import Telemetry
from hpcbench.runtime.registry import Registry

__all__ = ["POLICIES", "Policy", "PolicyConfig", "PolicyContext", "PolicyError", "Decision", "Vote", "FIELDS",
           "Telemetry"]

#: policy name -> class (built from its own config section)
POLICIES: Registry[type[Policy]] = Registry("policy", {
    BatchSchedule.name: BatchSchedule,
    ElasticSchedule.name: ElasticSchedule,
    GnsBatch.name: GnsBatch,
    Interference.name: Interference,
    Provisioning.name: Provisioning,
    SyncSwitch.name: SyncSwitch,
    StellaTrain.name: StellaTrain,
})

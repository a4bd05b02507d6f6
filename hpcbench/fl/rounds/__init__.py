"""Round drivers: ``ROUND_DRIVERS`` maps ``mode`` to the loop that runs a federated job's steps.

A driver is built from :class:`hpcbench.fl.rounds.parts.RoundParts` (the
executor pool, the client engine, the clock, the strategies and rank 0's
evaluator, checkpointer and codecs) and runs rank 0's side of every step;
the executors' side is the same for every driver
(:func:`hpcbench.fl.rounds.parts.run_executor`). Torch-, MPI- and
h5py-free at import: a registry line names its driver class by import path
(the config validates ``mode`` against it).
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass

from hpcbench.runtime.registry import Registry

__all__ = ["DriverEntry", "ROUND_DRIVERS"]


@dataclass(frozen=True)
class DriverEntry:
    """One registered round driver.

    Attributes
    ----------
    target : str
        ``module:Class`` of the driver.
    buffered : bool
        The aggregator receives one buffered pseudo-update per step instead
        of per-client updates (FedBuff), so only aggregators with
        ``accepts_pseudo_gradient`` fit.
    """

    target: str
    buffered: bool = False

    def load(self) -> type:
        """The driver class (imports its module)."""
        module, name = self.target.split(":")
        return getattr(importlib.import_module(module), name)


#: mode -> :class:`DriverEntry`
ROUND_DRIVERS: Registry[DriverEntry] = Registry("FL mode", {
    "sync": DriverEntry("hpcbench.fl.rounds.synchronous:SynchronousRounds"),
    "async": DriverEntry("hpcbench.fl.rounds.fedbuff:FedBuffRounds", buffered=True),
})

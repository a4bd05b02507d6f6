"""One synchroniser per hpcbench allreduce algorithm (``ring``, ``rabenseifner``, ``tree``, ... and ``auto``).

Each gradient bucket is reduced by :func:`hpcbench.collectives.iallreduce`
with ``op="avg"`` and the named algorithm, progressed by the collectives'
background thread while backward goes on; under ``schedule: priority`` a
step's buckets go out one at a time in a fixed priority order
(:class:`hpcbench.collectives.ordered.OrderedAllreduce`). The classes are made from the
algorithm registry (:func:`for_algorithm`), so a newly registered algorithm
is a synchroniser without any line here.
"""

from __future__ import annotations

from hpcbench.collectives import iallreduce
from hpcbench.runtime.config import section_options
from hpcbench.sync.base import Synchroniser

__all__ = ["CollectiveSync", "for_algorithm"]


class CollectiveSync(Synchroniser):
    """hpcbench's nonblocking allreduce (``iallreduce(op="avg")``) of each bucket with one algorithm.

    Costs follow the algorithm's registered alpha-beta-gamma model (Thakur,
    Rabenseifner and Gropp 2005; Patarasuk and Yuan 2009 for the ring). Bytes
    go through ``transport`` (a modelled link when the config asks for one).
    """

    algorithm = "auto"
    #: options of the algorithm (``weights`` of ``weighted_shards``), set by :meth:`use_algorithm`
    algorithm_options: dict = {}
    schedulable = True
    switches_algorithm = True

    def use_algorithm(self, algorithm):
        """Switch to ``algorithm``: a registered name, ``"auto"``, or the algorithm's section ``{name: NAME,
        ...its options}`` (validated by its ``Config``: e.g. ``{name: weighted_shards, weights: [...]}``, one
        shard weight per rank, see :func:`hpcbench.collectives.allreduce`). A resize of an elastic run rebuilds
        the synchroniser with the name alone (the weights were one per old rank).

        Raises
        ------
        ValueError
            An unknown name (the registry's message), an option the algorithm does not declare, or a bad value.
        """
        if algorithm == "auto":
            self.algorithm, self.algorithm_options = "auto", {}
            return
        from hpcbench.collectives.algorithms import section_of

        section = section_of(algorithm)
        self.algorithm = section.name
        self.algorithm_options = {k: v for k, v in section_options(section).items() if v is not None}

    def start_ordered(self, flats, order, clock):
        from hpcbench.collectives.ordered import OrderedAllreduce

        kw = {"transport": self.transport} if self.transport is not None else {"comm": self.comm}
        return OrderedAllreduce(flats, order, op="avg", algorithm=self.algorithm, name="grad", clock=clock,
                                **self.algorithm_options, **kw)

    def start(self, flat, index):
        kw = {"transport": self.transport} if self.transport is not None else {"comm": self.comm}
        return iallreduce(flat, flat, op="avg", algorithm=self.algorithm, name=f"grad{index}",
                          **self.algorithm_options, **kw)

    def test(self, handle):
        return handle.test()

    def wait(self, handle):
        handle.wait()


_CLASSES: dict[str, type[CollectiveSync]] = {}


def for_algorithm(algorithm: str) -> type[CollectiveSync]:
    """The synchroniser class of allreduce algorithm ``algorithm`` (a registry name or ``"auto"``)."""
    if algorithm not in _CLASSES:
        _CLASSES[algorithm] = type(f"CollectiveSync_{algorithm}", (CollectiveSync,),
                                   {"name": algorithm, "algorithm": algorithm, "cost_model": algorithm,
                                    "__doc__": CollectiveSync.__doc__})
    return _CLASSES[algorithm]

"""``hpcbench costmodel``'s declaration (:mod:`hpcbench.results.kinds`, light): kind, headline figures, scalars."""

from __future__ import annotations

import numpy as np

from hpcbench.results.headlines import Headline
from hpcbench.results.kinds import RunnerKind, ScalarSpec, declare
from hpcbench.runtime.texttable import NA

__all__ = ["COSTMODEL", "headlines"]


def headlines(h5, attrs) -> list[Headline]:
    """The headline figures of one results file of this kind (:mod:`hpcbench.results.headlines`)."""
    from hpcbench.results.reader import read_table     # h5py: when a file is read, not when declared

    if "results" not in h5:
        return [Headline("measured / predicted", NA("no results table"))]
    r = read_table(h5, "results")
    alg = np.asarray(r["algorithm"]).astype(str)
    return [Headline(f"measured / predicted, median [{name}]", float(np.median(r["ratio"][alg == name])), "x")
            for name in dict.fromkeys(alg)]


#: this runner's declaration (registered in :data:`hpcbench.results.kinds.KINDS`)
COSTMODEL = declare(RunnerKind("costmodel", "flags", headlines, {"results": ScalarSpec("size", ("algorithm", "link", "alpha"), ("measured", "predicted", "ratio"))}))

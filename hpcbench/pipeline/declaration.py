"""``hpcbench pipeline``'s declaration (:mod:`hpcbench.results.kinds`, light): kind, headline figures, scalars."""

from __future__ import annotations

import math

from hpcbench.results.headlines import Headline
from hpcbench.results.kinds import RunnerKind, ScalarSpec, declare
from hpcbench.runtime.texttable import NA

__all__ = ["PIPELINE", "headlines"]


def headlines(h5, attrs) -> list[Headline]:
    """The headline figures of one results file of this kind (:mod:`hpcbench.results.headlines`)."""
    from hpcbench.results.reader import read_table     # h5py: when a file is read, not when declared

    if "allocations" not in h5:
        return [Headline("iteration time", NA("no allocations table"))]
    a = read_table(h5, "allocations")
    names = [str(n) for n in a["allocator"]]
    even = float(a["measured_iteration_s"][names.index("even")]) if "even" in names else math.nan
    out = []
    for i, name in enumerate(names):
        measured = float(a["measured_iteration_s"][i])
        out.append(Headline(f"iteration time [{name}]", measured, "s"))
        out.append(Headline(f"predicted [{name}]", float(a["predicted_iteration_s"][i]), "s"))
        if name != "even":
            out.append(Headline(f"speed-up over even [{name}]",
                                even / measured if even == even else NA("even did not run"), "x"))
    return out


#: this runner's declaration (registered in :data:`hpcbench.results.kinds.KINDS`)
PIPELINE = declare(RunnerKind("pipeline", "config", headlines, {
        "iterations": ScalarSpec("iteration", ("allocator",), ("time_s", "loss", "bubble_fraction")),
        "allocations": ScalarSpec(None, ("allocator",), ("predicted_iteration_s", "measured_iteration_s", "solve_s")),
    }))

"""``hpcbench collectives``'s declaration (:mod:`hpcbench.results.kinds`, light): kind, headline figures, scalars."""

from __future__ import annotations

import numpy as np

from hpcbench.results.headlines import Headline
from hpcbench.results.kinds import RunnerKind, ScalarSpec, declare
from hpcbench.runtime.texttable import NA

__all__ = ["COLLECTIVES", "headlines"]


def headlines(h5, attrs) -> list[Headline]:
    """The headline figures of one results file of this kind (:mod:`hpcbench.results.headlines`)."""
    from hpcbench.results.reader import read_table     # h5py: when a file is read, not when declared

    out = []
    if "overlap" in h5:
        ov = read_table(h5, "overlap")
        for transport in dict.fromkeys(str(t) for t in ov["transport"]):
            sel = np.asarray(ov["transport"]).astype(str) == transport
            out.append(Headline(f"communication hidden [{transport}]", 100 * float(np.mean(ov["hidden"][sel])), "%"))
    if "results" not in h5:
        return out or [Headline("busbw", NA("no results table"))]
    r = read_table(h5, "results")
    if not len(r["size"]):
        return out + [Headline("busbw", NA("no size measured"))]
    impl = np.asarray(r["impl"]).astype(str)
    big, small = int(np.max(r["size"])), int(np.min(r["size"]))
    for name in dict.fromkeys(impl):
        at_big = (impl == name) & (r["size"] == big)
        at_small = (impl == name) & (r["size"] == small)
        out.append(Headline(f"busbw at {big} B [{name}]", float(r["busbw"][at_big][0]), "GB/s"))
        out.append(Headline(f"p50 at {small} B [{name}]", float(r["p50"][at_small][0]), "us"))
        if name != "mpi":
            vs = float(r["vs_mpi"][at_big][0])
            out.append(Headline(f"time / MPI at {big} B [{name}]", vs if vs == vs else NA("MPI did not run"), "x"))
    if attrs.get("check"):
        out.append(Headline("check", f"{attrs['check']} ({attrs.get('wrong_elements', 0)} wrong elements)"))
    return out


#: this runner's declaration (registered in :data:`hpcbench.results.kinds.KINDS`)
COLLECTIVES = declare(RunnerKind("collectives", "flags", headlines, {
        "results": ScalarSpec("size", ("impl",), ("busbw", "algbw", "time", "p50", "p99", "vs_mpi")),
        "overlap": ScalarSpec("size", ("transport",), ("hidden", "t_comm", "t_compute", "t_overlap")),
    }))

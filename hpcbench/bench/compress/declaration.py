"""``hpcbench compress``'s declaration (:mod:`hpcbench.results.kinds`, light): kind, headline figures, scalars."""

from __future__ import annotations

import numpy as np

from hpcbench.results.headlines import Headline
from hpcbench.results.kinds import RunnerKind, ScalarSpec, declare
from hpcbench.runtime.texttable import NA

__all__ = ["COMPRESS", "headlines"]


def headlines(h5, attrs) -> list[Headline]:
    """The headline figures of one results file of this kind (:mod:`hpcbench.results.headlines`)."""
    from hpcbench.results.reader import read_table     # h5py: when a file is read, not when declared

    if "allreduce" not in h5 or not h5["allreduce"].attrs.get("rows", 0):
        return [Headline("speed-up", NA("no allreduce rows (--no-allreduce)"))]
    r = read_table(h5, "allreduce")
    big = int(np.max(r["size_bytes"]))
    out = []
    for i in np.flatnonzero(r["size_bytes"] == big):
        label = f"{r['compressor'][i]}, {r['output'][i]}, {r['link'][i]}"
        out.append(Headline(f"speed-up over dense at {big / 1e6:g} MB [{label}]", float(r["speedup"][i]), "x"))
    return out


#: this runner's declaration (registered in :data:`hpcbench.results.kinds.KINDS`)
COMPRESS = declare(RunnerKind("compress", "flags", headlines, {
        "local": ScalarSpec("size_bytes", ("compressor",), ("compress_s", "decompress_s", "throughput", "recall")),
        "allreduce": ScalarSpec("size_bytes", ("compressor", "output", "link"),
                                ("time", "dense_time", "speedup", "wire_bytes")),
        "convergence": ScalarSpec(None, ("compressor",), ("final_loss", "test_accuracy")),
    }))

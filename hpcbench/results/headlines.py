"""Each runner's headline figures, read from its results file (``hpcbench results show/ls/diff``).

One function per runner kind in :data:`HEADLINES`, reading tables and root
attributes only (no MPI, no runner import): the numbers a person looks for
first (time-to-accuracy, throughput and efficiency, busbw, speed-up). A
figure that cannot be given is an :class:`~hpcbench.runtime.texttable.NA`
with the reason (target not reached, synchroniser skipped, no MPI row).
Adding a runner: one function and one line in :data:`HEADLINES`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable, Mapping

import numpy as np

from hpcbench.runtime.texttable import NA

__all__ = ["Headline", "HEADLINES", "headlines"]


@dataclass(frozen=True)
class Headline:
    """One headline figure: name, value (a number, text, or NA with the reason), unit."""

    name: str
    value: Any
    unit: str = ""


def _num(x) -> float:
    try:
        return float(x)
    except (TypeError, ValueError):
        return math.nan


def _fl(h5, attrs: Mapping[str, Any]) -> list[Headline]:
    target = _num(attrs.get("target_accuracy"))
    tta = _num(attrs.get("time_to_accuracy_s"))
    rta = int(attrs.get("rounds_to_accuracy", -1))
    unreached = NA(f"target {target:g} not reached" if target == target else "no target")
    out = [Headline(f"time to accuracy {target:g}", tta if rta > 0 else unreached, "s virtual"),
           Headline("rounds to accuracy", rta if rta > 0 else unreached, "")]
    final = _num(attrs.get("final_test_accuracy"))
    if final != final and "rounds" in h5:
        from hpcbench.results.reader import read_table

        acc = read_table(h5, "rounds")["test_accuracy"]
        acc = acc[np.isfinite(acc)]
        final = float(acc[-1]) if len(acc) else math.nan
    out.append(Headline("final test accuracy", final if final == final else NA("no evaluated round"), ""))
    rounds = attrs.get("rounds_completed")
    if rounds is None and "rounds" in h5:
        rounds = int(h5["rounds"].attrs.get("rows", 0))
    out.append(Headline("rounds", rounds if rounds is not None else NA("no rounds table"), ""))
    wall = _num(attrs.get("wall_s"))
    out.append(Headline("wall time of the rounds", wall if wall == wall else NA("run did not complete"), "s"))
    return out


def _train(h5, attrs) -> list[Headline]:
    from hpcbench.results.reader import read_table

    if "summary" not in h5:
        return [Headline("throughput", NA("no summary table (run did not finish a synchroniser)"))]
    s = read_table(h5, "summary")
    out = []
    for i in range(len(s["sync"])):
        label = str(s["sync"][i]) + ("" if str(s["variant"][i]) == "none" else f", {s['variant'][i]}")
        status = str(s["status"][i])
        if not status.startswith("ok"):
            out.append(Headline(f"img/s per worker [{label}]", NA(status)))
            continue
        out.append(Headline(f"img/s per worker [{label}]", float(s["img_per_s_worker"][i]), "img/s"))
        pred = float(s["predicted_efficiency"][i])
        out.append(Headline(f"efficiency of ideal [{label}]", float(s["efficiency"][i]), ""))
        out.append(Headline(f"predicted efficiency [{label}]",
                            pred if pred == pred else NA("no alpha-beta prediction: link not modelled"), ""))
        overhead = float(s["monitor_overhead"][i])
        if overhead == overhead:
            out.append(Headline(f"monitor overhead [{label}]", 100 * overhead, "%"))
    return out


def _pipeline(h5, attrs) -> list[Headline]:
    from hpcbench.results.reader import read_table

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


def _collectives(h5, attrs) -> list[Headline]:
    from hpcbench.results.reader import read_table

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


def _compress(h5, attrs) -> list[Headline]:
    from hpcbench.results.reader import read_table

    if "allreduce" not in h5 or not h5["allreduce"].attrs.get("rows", 0):
        return [Headline("speed-up", NA("no allreduce rows (--no-allreduce)"))]
    r = read_table(h5, "allreduce")
    big = int(np.max(r["size_bytes"]))
    out = []
    for i in np.flatnonzero(r["size_bytes"] == big):
        label = f"{r['compressor'][i]}, {r['output'][i]}, {r['link'][i]}"
        out.append(Headline(f"speed-up over dense at {big / 1e6:g} MB [{label}]", float(r["speedup"][i]), "x"))
    return out


def _costmodel(h5, attrs) -> list[Headline]:
    from hpcbench.results.reader import read_table

    if "results" not in h5:
        return [Headline("measured / predicted", NA("no results table"))]
    r = read_table(h5, "results")
    alg = np.asarray(r["algorithm"]).astype(str)
    return [Headline(f"measured / predicted, median [{name}]", float(np.median(r["ratio"][alg == name])), "x")
            for name in dict.fromkeys(alg)]


#: runner kind -> headline figures of one results file
HEADLINES: dict[str, Callable[[Any, Mapping[str, Any]], list[Headline]]] = {
    "fl": _fl, "train": _train, "pipeline": _pipeline, "collectives": _collectives, "compress": _compress,
    "costmodel": _costmodel,
}


def headlines(path, attrs: Mapping[str, Any] | None = None) -> list[Headline]:
    """The headline figures of results file ``path`` (empty for a kind without any).

    Raises
    ------
    OSError
        The file cannot be read.
    """
    from hpcbench.results.reader import read_attrs, read_consistent

    def read(h5):
        found = read_attrs(h5) if attrs is None else attrs
        fn = HEADLINES.get(str(found.get("kind", "")))
        return [] if fn is None else fn(h5, found)

    return read_consistent(path, read)

"""``hpcbench train``'s declaration (:mod:`hpcbench.results.kinds`, light): kind, headline figures, scalars."""

from __future__ import annotations

from hpcbench.results.headlines import Headline
from hpcbench.results.kinds import RunnerKind, ScalarSpec, declare
from hpcbench.runtime.texttable import NA

__all__ = ["TRAIN", "headlines"]


def headlines(h5, attrs) -> list[Headline]:
    """The headline figures of one results file of this kind (:mod:`hpcbench.results.headlines`)."""
    from hpcbench.results.reader import read_table     # h5py: when a file is read, not when declared

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


#: this runner's declaration (registered in :data:`hpcbench.results.kinds.KINDS`)
TRAIN = declare(RunnerKind("train", "config", headlines, {
        "steps": ScalarSpec("step", ("sync", "variant"),
                            ("loss", "step_s", "samples_per_s_worker", "samples_per_s_total", "compute_s",
                             "comm_span_s", "comm_exposed_s", "hidden_fraction")),
        "iterations": ScalarSpec("iteration", ("sync", "variant"), ("img_per_s_worker", "accuracy")),
        "summary": ScalarSpec(None, ("sync", "variant"),
                              ("img_per_s_worker", "img_per_s_total", "efficiency", "predicted_efficiency",
                               "monitor_overhead", "final_accuracy")),
    }))

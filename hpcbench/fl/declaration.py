"""``hpcbench fl``'s declaration (:mod:`hpcbench.results.kinds`, light): kind, headline figures, scalars."""

from __future__ import annotations

import math

import numpy as np

from hpcbench.results.headlines import Headline, number
from hpcbench.results.kinds import RunnerKind, ScalarSpec, declare
from hpcbench.runtime.texttable import NA

__all__ = ["FL", "headlines"]

_ROUND = ("test_accuracy", "test_loss", "train_loss", "virtual_time_s", "round_duration_s", "round_wall_s",
          "wall_time_s", "participants", "stragglers", "dropouts", "learning_rate", "buffered", "mean_staleness",
          "in_flight")


def headlines(h5, attrs) -> list[Headline]:
    """The headline figures of one results file of this kind (:mod:`hpcbench.results.headlines`)."""
    from hpcbench.results.reader import read_table     # h5py: when a file is read, not when declared

    target = number(attrs.get("target_accuracy"))
    tta = number(attrs.get("time_to_accuracy_s"))
    rta = int(attrs.get("rounds_to_accuracy", -1))
    unreached = NA(f"target {target:g} not reached" if target == target else "no target")
    out = [Headline(f"time to accuracy {target:g}", tta if rta > 0 else unreached, "s virtual"),
           Headline("rounds to accuracy", rta if rta > 0 else unreached, "")]
    final = number(attrs.get("final_test_accuracy"))
    if final != final and "rounds" in h5:
        acc = read_table(h5, "rounds")["test_accuracy"]
        acc = acc[np.isfinite(acc)]
        final = float(acc[-1]) if len(acc) else math.nan
    out.append(Headline("final test accuracy", final if final == final else NA("no evaluated round"), ""))
    rounds = attrs.get("rounds_completed")
    if rounds is None and "rounds" in h5:
        rounds = int(h5["rounds"].attrs.get("rows", 0))
    out.append(Headline("rounds", rounds if rounds is not None else NA("no rounds table"), ""))
    wall = number(attrs.get("wall_s"))
    out.append(Headline("wall time of the rounds", wall if wall == wall else NA("run did not complete"), "s"))
    return out


#: this runner's declaration (registered in :data:`hpcbench.results.kinds.KINDS`)
FL = declare(RunnerKind("fl", "config", headlines, {"rounds": ScalarSpec("round", (), _ROUND)}))

"""Checking a figure's claims against its runs: PASS, FAIL, or n/a with the reason.

- ``n/a``: the claim needs the full tier's sizes (``full tier only``), or it
  selects no row and the manifest says why that may happen (``missing_ok``,
  e.g. Horovod is not built here), or it needs more cores than this process
  may use (``min_cores``: e.g. real compute beside each rank's own
  communication thread; the value is still computed and shown);
- ``FAIL``: the value misses the threshold, is undefined (NaN: a target never
  reached), or cannot be computed (a run failed, a column is missing);
- ``PASS``: the value meets the threshold.

Apart from the verdict, which checks the threshold (the target), a claim
that names ``states`` (the value the docs state) and ``tolerance`` is checked
against the docs: ``agrees``, or ``doc drifted: states 1.57 x, measured
1.528 x``. And a claim computed from results files that other code made
(kept with ``--reuse``) says so in the ``files`` column.
"""

from __future__ import annotations

import dataclasses
import math
import os
from dataclasses import dataclass

from hpcbench.reproduce.data import FigureData
from hpcbench.reproduce.expression import EmptySelection, ExpressionError, evaluate
from hpcbench.reproduce.manifest import Claim

__all__ = ["ClaimResult", "check_claim", "doc_agreement", "mark_files", "HEADER", "table_rows"]

#: the printed claims table
HEADER = ("figure", "claim", "threshold", "measured", "result", "docs", "files")

#: the ``files`` column of a claim computed from this session's code's files
THIS_CODE = "this code"


@dataclass(frozen=True)
class ClaimResult:
    """The outcome of one claim.

    Attributes
    ----------
    figure : str
    claim : Claim
    verdict : str
        ``PASS``, ``FAIL`` or ``n/a``.
    value : float or None
        The measured quantity (None where it could not be computed).
    measured : str
        What the table shows in the ``measured`` column.
    why : str
        Why it is n/a or failed (empty for PASS).
    notes : tuple of str
        NaNs met on the way, and the like.
    doc : str
        Agreement with the value the docs state (:func:`doc_agreement`).
    files : str
        ``this code``, or which other code made the files it read (``--reuse``).
    """

    figure: str
    claim: Claim
    verdict: str
    value: float | None
    measured: str
    why: str = ""
    notes: tuple[str, ...] = ()
    doc: str = ""
    files: str = THIS_CODE

    @property
    def result(self) -> str:
        """The ``result`` column: ``PASS``, ``FAIL`` or ``n/a (why)``."""
        return f"n/a ({self.why})" if self.verdict == "n/a" else self.verdict


def doc_agreement(claim: Claim, value: float | None) -> str:
    """``agrees (states 1.57 x)``, ``doc drifted: states 1.57 x, measured 1.528 x``, ``not measured`` or ``-``.

    ``-``: the claim states no doc value; ``not measured``: no value was computed.
    """
    if claim.states is None:
        return "-"
    if value is None or math.isnan(value):
        return f"not measured (states {claim.states_text()})"
    if claim.agrees(value):
        return f"agrees (states {claim.states_text()})"
    unit = f" {claim.unit}" if claim.unit else ""
    return f"doc drifted: states {claim.states_text()}, measured {value:.4g}{unit}"


def mark_files(result: ClaimResult, other_code: dict[str, str]) -> ClaimResult:
    """``result`` with its ``files`` column naming the other code that made the files it read.

    Parameters
    ----------
    result : ClaimResult
    other_code : dict
        Job id (of the claim's figure) -> short code identity of a results
        file kept by ``--reuse`` though other code made it.
    """
    names = sorted({other_code[job] for job in result.claim.quantity.jobs if job in other_code})
    if not names:
        return result
    return dataclasses.replace(result, files=f"other code: {', '.join(names)} (--reuse)")


def check_claim(figure: str, claim: Claim, data: FigureData, tier: str, cores: int | None = None) -> ClaimResult:
    """Evaluate ``claim`` on ``data`` in ``tier`` (never raises for bad data: that is a FAIL).

    ``cores``: the CPUs this process may use (default: its affinity mask), against the claim's ``min_cores``.
    The verdict checks the threshold; ``doc`` the value the docs state.
    """
    result = _verdict(figure, claim, data, tier, cores)
    return dataclasses.replace(result, doc=doc_agreement(claim, result.value))


def _verdict(figure: str, claim: Claim, data: FigureData, tier: str, cores: int | None) -> ClaimResult:
    if claim.full_only and tier != "full":
        return ClaimResult(figure, claim, "n/a", None, "n/a", "full tier only")
    try:
        ev = evaluate(claim.quantity, data)
    except EmptySelection as exc:
        if claim.missing_ok:
            return ClaimResult(figure, claim, "n/a", None, "n/a", f"{claim.missing_ok}: {exc}")
        return ClaimResult(figure, claim, "FAIL", None, "no data", str(exc))
    except ExpressionError as exc:
        return ClaimResult(figure, claim, "FAIL", None, "no data", str(exc))
    unit = f" {claim.unit}" if claim.unit else ""
    if math.isnan(ev.value):
        return ClaimResult(figure, claim, "FAIL", None, "undefined", "; ".join(ev.notes) or "NaN",
                           tuple(ev.notes))
    measured = f"{ev.value:.4g}{unit}"
    cores = len(os.sched_getaffinity(0)) if cores is None else cores
    if claim.min_cores is not None and cores < claim.min_cores:
        return ClaimResult(figure, claim, "n/a", ev.value, measured,
                           f"needs {claim.min_cores} cores, this machine has {cores}", tuple(ev.notes))
    if claim.holds(ev.value):
        return ClaimResult(figure, claim, "PASS", ev.value, measured, "", tuple(ev.notes))
    return ClaimResult(figure, claim, "FAIL", ev.value, measured, f"misses {claim.threshold_text()}",
                       tuple(ev.notes))


def table_rows(results: list[ClaimResult]) -> list[tuple[str, ...]]:
    """The rows of the printed claims table (:data:`HEADER`); a failure's reason follows its verdict."""
    rows = []
    for r in results:
        result = r.result
        if r.verdict == "FAIL" and r.why and r.value is None:
            result = f"FAIL ({r.why})"
        rows.append((r.figure, r.claim.name, r.claim.threshold_text(), r.measured, result, r.doc, r.files))
    return rows

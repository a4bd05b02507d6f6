"""Rates and durations written as people write them (``"1Gbit"``, ``"0.1ms"``), parsed to SI numbers.

Standard library only, and no MPI: the launcher side (:mod:`hpcbench.runtime.emulated_net`) parses link
settings before any rank exists, and the link model (:mod:`hpcbench.collectives.linkmodel`) the same text.
"""

from __future__ import annotations

import math
import re

__all__ = ["parse_rate", "parse_duration"]

_UNITS = {"": 1.0, "k": 1e3, "m": 1e6, "g": 1e9, "t": 1e12}
_SECONDS = {"": 1.0, "s": 1.0, "ms": 1e-3, "us": 1e-6, "µs": 1e-6, "ns": 1e-9}
_NUMBER = r"([0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?)"


def _number(text: str | float, suffix: str, scale: dict, what: str, example: str) -> float:
    """``text`` as a float times the ``scale`` of its unit (matched by the ``suffix`` pattern; none: 1)."""
    if isinstance(text, (int, float)):
        return float(text)
    m = re.fullmatch(r"\s*" + _NUMBER + r"\s*" + suffix + r"\s*", str(text))
    if not m:
        raise ValueError(f"bad {what} {text!r}: expected e.g. {example}")
    return float(m.group(1)) * scale[(m.group(2) or "").lower()]


def parse_rate(text: str | float) -> float:
    """Bandwidth in bit/s from ``"100Mbit"``, ``"1Gbit"``, ``"10 Gbit/s"``, ``"2.5e9"``...

    Prefixes are decimal (``k`` = 1e3, ``G`` = 1e9), as in ``tc``'s ``kbit``/``gbit``.

    Raises
    ------
    ValueError
        If the text is not a positive rate.
    """
    v = _number(text, r"([kKmMgGtT]?)(?:bit|b|bps)?(?:/s)?", _UNITS, "rate", "'100Mbit', '1Gbit', '10Gbit'")
    if not (v > 0 and math.isfinite(v)):
        raise ValueError(f"rate must be positive and finite, got {text!r}")
    return v


def parse_duration(text: str | float) -> float:
    """Seconds from ``"0.1ms"``, ``"100us"``, ``"2 s"``, ``"5e-4"`` (a bare number is seconds).

    Raises
    ------
    ValueError
        If the text is not a duration >= 0 (the message quotes it).
    """
    v = _number(text, r"(s|ms|us|µs|ns)?", _SECONDS, "duration", "'0.1ms', '100us', '1s'")
    if not (v >= 0 and math.isfinite(v)):
        raise ValueError(f"duration must be >= 0 and finite, got {text!r}")
    return v

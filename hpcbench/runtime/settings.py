"""Run-time switches that change messages or timing, as flags of every runner.

Each switch is both a flag of every runner (``--eager-bytes 4000``) and an
environment variable (``HPCBENCH_EAGER_BYTES``) read where it takes effect,
so that programs a runner launches inherit it. The flag wins over the
variable. Whatever its source, the effective value of every switch is
recorded in each results file (root attributes ``setting_<name>``), since
results depend on them.
"""

from __future__ import annotations

import argparse
import os
from dataclasses import dataclass
from typing import Callable

from hpcbench.runtime.errors import InputError

__all__ = ["Setting", "SETTINGS", "add_arguments", "apply", "snapshot"]


def _positive_int(text: str) -> str:
    try:
        ok = int(text) > 0
    except ValueError:
        ok = False
    if not ok:
        raise ValueError("expected a positive integer")
    return str(int(text))


def _choice(*names: str) -> Callable[[str], str]:
    def parse(text: str) -> str:
        value = text.strip().lower()
        if value not in names:
            raise ValueError(f"expected one of {', '.join(names)}")
        return value
    return parse


def _on_off(text: str) -> str:
    value = text.strip().lower()
    if value in ("on", "1", "true", "yes"):
        return "on"
    if value in ("off", "0", "false", "no", "numpy"):
        return "off"
    raise ValueError("expected 'on' or 'off'")


@dataclass(frozen=True)
class Setting:
    """One switch.

    Attributes
    ----------
    name : str
        Attribute suffix in results files, and the flag (``_`` becomes ``-``).
    env : str
        Environment variable that carries it to where it takes effect.
    default : str
        Effective value when neither flag nor variable is given.
    parse : callable
        Normalises a value; raises ValueError on a bad one.
    help : str
        What it changes.
    """

    name: str
    env: str
    default: str
    parse: Callable[[str], str]
    help: str

    def effective(self) -> str:
        """The value in force now (variable, else default), normalised."""
        raw = os.environ.get(self.env)
        if raw is None:
            return self.default
        return self.parse(raw)


#: Every switch; a new one is one line here and is then a flag of every runner.
SETTINGS: tuple[Setting, ...] = (
    Setting("eager_bytes", "HPCBENCH_EAGER_BYTES", "8000", _positive_int,
            "largest point-to-point message piece in bytes (keep under the MPI library's eager limit; "
            "see hpcbench.runtime.chunked)"),
    Setting("progress_engine", "HPCBENCH_PROGRESS", "thread", _choice("thread", "test"),
            "progress of asynchronous collectives: a background thread, or only inside test()/wait()"),
    Setting("jit", "HPCBENCH_JIT", "on", _on_off,
            "compiled (Numba) loops in compression; 'off' takes the numpy path (same bits)"),
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add one ``--NAME VALUE`` flag per switch to ``parser``."""
    group = parser.add_argument_group("run-time switches (recorded in the results file)")
    for s in SETTINGS:
        group.add_argument("--" + s.name.replace("_", "-"), dest="setting_" + s.name, metavar="VALUE",
                           default=None, help=f"{s.help} (default {s.default}; env {s.env})")


def apply(args: argparse.Namespace) -> None:
    """Put flagged values into the environment; check every effective value.

    Raises
    ------
    InputError
        A flag or variable holds a bad value; the message names it.
    """
    for s in SETTINGS:
        raw = getattr(args, "setting_" + s.name, None)
        source = "--" + s.name.replace("_", "-")
        if raw is None:
            raw, source = os.environ.get(s.env), s.env
            if raw is None:
                continue
        try:
            value = s.parse(raw)
        except ValueError as exc:
            raise InputError(f"{source}: bad value {raw!r}: {exc}") from None
        os.environ[s.env] = value


def snapshot() -> dict[str, str]:
    """``{"setting_<name>": effective value}`` for every switch."""
    return {"setting_" + s.name: s.effective() for s in SETTINGS}

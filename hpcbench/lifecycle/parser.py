"""The command line of a job: an ``argparse`` parser that prints only on rank 0 and never exits."""

from __future__ import annotations

import argparse
import sys

from hpcbench.runtime.errors import InputError

__all__ = ["RankParser", "UsageError", "HelpShown"]


class UsageError(InputError):
    """A command-line usage error (argparse's), printed with the usage line by rank 0."""


class HelpShown(Exception):
    """``--help`` was printed (or argparse asked to exit); ``args[0]`` is the exit status."""


class RankParser(argparse.ArgumentParser):
    """``argparse.ArgumentParser`` that prints only on rank 0 and never exits.

    Usage errors raise :class:`UsageError` (the lifecycle agrees on them and
    exits 2 on every rank); ``--help`` prints on rank 0 and ends every rank
    with status 0.
    """

    rank: int = 0

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        from hpcbench.runtime.config import finite_float

        self.register("type", float, finite_float)  # every type=float flag refuses inf and nan

    def error(self, message: str):  # noqa: D102 - argparse API
        raise UsageError(f"{self.format_usage().rstrip()}\n{self.prog}: error: {message}")

    def exit(self, status: int = 0, message: str | None = None):  # noqa: D102
        if message and self.rank == 0:
            sys.stderr.write(message)
        raise HelpShown(status)

    def _print_message(self, message, file=None):  # noqa: D102
        if self.rank == 0:
            super()._print_message(message, file)


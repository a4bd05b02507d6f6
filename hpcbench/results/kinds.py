"""What a runner declares about its results files, read by the results helpers without importing the runner.

Each runner declares, in a light module of its own (``hpcbench/RUNNER/declaration.py``, named by its line in
:data:`hpcbench.cli.SUBCOMMANDS`), a :class:`RunnerKind`: the ``kind`` its results files carry, its headline
figures, its TensorBoard scalar tables and how ``hpcbench reproduce`` passes it settings; :func:`declare`
registers it in :data:`KINDS`. Its ``Job`` takes its ``kind`` from there (so a running job has declared it),
and the commands that read files of any kind (``hpcbench results``, ``hpcbench reproduce``) load every
declaration through :func:`hpcbench.cli.load_declarations` first. Core reads :data:`KINDS` and never imports
a runner.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Literal, Mapping

from hpcbench.runtime.registry import Registry

__all__ = ["ScalarSpec", "RunnerKind", "KINDS", "declare"]


@dataclass(frozen=True)
class ScalarSpec:
    """How one results table becomes TensorBoard series.

    Attributes
    ----------
    step : str or None
        Integer column giving each row's step; None: the row's number in the table.
    groups : tuple of str
        Columns whose values (``:g`` for numbers) are appended to the tag, one
        series per combination (``results/busbw/ring``).
    values : tuple of str
        Columns written as scalars, tag ``TABLE/COLUMN[/GROUP...]``; columns a
        file lacks (an older version, the other FL mode) are skipped.
    """

    step: str | None
    groups: tuple[str, ...]
    values: tuple[str, ...]


@dataclass(frozen=True)
class RunnerKind:
    """A runner's declaration about its results files.

    Attributes
    ----------
    kind : str
        The ``kind`` root attribute of its results files (its subcommand's name).
    settings : {"config", "flags"} or None
        How ``hpcbench reproduce`` passes it settings: a YAML job file and ``--dotted.key VALUE`` parsed as
        YAML, or plain argparse flags; None: not a job of ``jobs/reproduce.yaml``.
    headlines : callable or None
        ``headlines(h5, attrs) -> list[Headline]``: the figures a person looks for first
        (:mod:`hpcbench.results.headlines`), reading tables and root attributes only.
    scalar_tables : mapping of str to ScalarSpec
        Table -> the columns that become TensorBoard scalars (:mod:`hpcbench.results.tensorboard`); a table
        not named writes nothing.
    """

    kind: str
    settings: Literal["config", "flags"] | None = None
    headlines: Callable[[Any, Mapping[str, Any]], list] | None = None
    scalar_tables: Mapping[str, ScalarSpec] = field(default_factory=dict)


#: runner kind -> its declaration (filled by each runner's declaration module)
KINDS: Registry[RunnerKind] = Registry("runner kind")


def declare(kind: RunnerKind) -> RunnerKind:
    """Register ``kind`` in :data:`KINDS` (again: the same declaration, e.g. a module imported twice, is kept).

    Raises
    ------
    ValueError
        Another declaration has that kind.
    """
    if KINDS.get(kind.kind) not in (None, kind):
        raise ValueError(f"runner kind {kind.kind!r} is already declared")
    KINDS[kind.kind] = kind
    return kind

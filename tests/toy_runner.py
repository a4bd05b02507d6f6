"""A toy runner's declaration, written in the tests alone (no file of the package changes): what its results files
are (kind ``toy``), its headline figure and its TensorBoard scalars. ``tests/test_runner_declaration.py`` adds
its one line to ``cli.SUBCOMMANDS``."""

from __future__ import annotations

from hpcbench.results.headlines import Headline
from hpcbench.results.kinds import RunnerKind, ScalarSpec, declare

__all__ = ["TOY", "headlines"]


def headlines(h5, attrs) -> list[Headline]:
    """The last loss of the ``steps`` table."""
    from hpcbench.results.reader import read_table

    loss = read_table(h5, "steps")["loss"]
    return [Headline("last loss", float(loss[-1]), "")]


TOY = declare(RunnerKind("toy", "flags", headlines, {"steps": ScalarSpec("step", ("worker",), ("loss",))}))

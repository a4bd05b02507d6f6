"""``hpcbench results ACTION ...``: browse, compare and convert result files without opening h5py.

A plain command (no MPI job). Actions, one module each (``add_parser`` and
``run``), listed in :data:`ACTIONS`:

- ``ls [DIR ...]``: one line per results file: runner, job, status, ranks,
  start, key figure;
- ``show RUN.h5``: provenance, config, tables with their units (and first
  rows), the runner's headline figures;
- ``diff A.h5 B.h5``: config and headline figures side by side;
- ``tensorboard RUN.h5 [...] DIR``: a finished run's scalars as TensorBoard
  event files (as ``--tensorboard`` writes them live);
- ``export --fedscale RUN.h5``: FedScale's ``testing_perf`` pickle.

Exit status 0 on success, 2 on bad input (a missing or foreign file, an
existing output without ``--overwrite``), naming the file. A run's state
comes from :func:`hpcbench.results.status.run_status` and its headline
figures from :mod:`hpcbench.results.headlines`, the one place each (with
the runners' declarations, loaded through :data:`hpcbench.cli.SUBCOMMANDS`).
"""

from __future__ import annotations

import argparse
import importlib
import sys

from hpcbench.runtime.errors import InputError

__all__ = ["ACTIONS", "main"]

#: action -> module with ``add_parser(actions)`` and ``run(args) -> int``
ACTIONS = {
    "ls": "hpcbench.results_command.ls",
    "show": "hpcbench.results_command.show",
    "diff": "hpcbench.results_command.diff",
    "tensorboard": "hpcbench.results_command.tensorboard",
    "export": "hpcbench.results_command.export",
}


class _Parser(argparse.ArgumentParser):
    def error(self, message: str):  # noqa: D102 - argparse API: usage errors exit 2
        self.print_usage(sys.stderr)
        self.exit(2, f"{self.prog}: error: {message}\n")


def _parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="hpcbench results", description="Browse, compare and convert hpcbench result files.")
    actions = parser.add_subparsers(dest="action", required=True, metavar="ACTION", parser_class=_Parser)
    for name, module in ACTIONS.items():
        importlib.import_module(module).add_parser(actions, name)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run ``hpcbench results ...``; returns the exit status (0 done, 2 bad input)."""
    from hpcbench.cli import load_declarations

    args = _parser().parse_args(sys.argv[1:] if argv is None else argv)
    load_declarations()     # what each runner's files hold: their headline figures and scalars
    try:
        return int(importlib.import_module(ACTIONS[args.action]).run(args) or 0)
    except InputError as exc:
        print(f"hpcbench results {args.action}: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())

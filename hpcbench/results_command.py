"""``hpcbench results export --fedscale RUN.h5 [-o OUT.pkl] [--overwrite]``: convert result files.

A plain command (no MPI job): it reads an hpcbench HDF5 result file and writes
it in another tool's format. Today one format: FedScale's ``testing_perf``
pickle of a federated run (:mod:`hpcbench.fl.fedscale_export`). Exit status 0
on success, 2 on bad input (a missing, non-HDF5 or non-FL file, or an
existing output without ``--overwrite``), naming the file.
"""

from __future__ import annotations

import argparse
import sys

from hpcbench.runtime.errors import InputError

__all__ = ["main"]


class _Parser(argparse.ArgumentParser):
    def error(self, message: str):  # noqa: D102 - argparse API: usage errors exit 2
        self.print_usage(sys.stderr)
        self.exit(2, f"{self.prog}: error: {message}\n")


def _parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="hpcbench results", description="Convert hpcbench result files for other tools.")
    actions = parser.add_subparsers(dest="action", required=True, metavar="ACTION", parser_class=_Parser)
    export = actions.add_parser("export", help="write a result file in another tool's format",
                                description="Write a result file in another tool's format.")
    export.add_argument("--fedscale", metavar="RUN.h5", required=True,
                        help="an hpcbench fl result file, written as FedScale's testing_perf pickle "
                             "(round -> clock, loss, top_1) for FedScale analysis scripts")
    export.add_argument("-o", "--output", metavar="OUT.pkl", default=None,
                        help="pickle to write (default RUN.testing_perf.pkl beside RUN.h5)")
    export.add_argument("--overwrite", action="store_true", help="replace an existing output file")
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run ``hpcbench results ...``; returns the exit status (0 done, 2 bad input)."""
    args = _parser().parse_args(sys.argv[1:] if argv is None else argv)
    from hpcbench.fl.fedscale_export import write_testing_perf

    try:
        out, history = write_testing_perf(args.fedscale, args.output, args.overwrite)
    except InputError as exc:
        print(f"hpcbench results: error: {exc}", file=sys.stderr)
        return 2
    print(f"{out}: {len(history['perf'])} evaluated rounds in FedScale's testing_perf format")
    return 0


if __name__ == "__main__":
    sys.exit(main())

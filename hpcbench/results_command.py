"""``hpcbench results export --fedscale RUN.h5 [-o OUT.pkl] [--overwrite]`` and ``hpcbench results show RUN.h5...``.

A plain command (no MPI job). ``export`` reads an hpcbench HDF5 result file
and writes it in another tool's format; today one format: FedScale's
``testing_perf`` pickle of a federated run (:mod:`hpcbench.fl.fedscale_export`).
``show`` prints what a file holds and its state, with a file a kill left
``running`` shown as ``interrupted`` (:func:`hpcbench.results.status.file_status`).
Exit status 0 on success, 2 on bad input (a missing, non-HDF5 or non-FL file,
or an existing output without ``--overwrite``), naming the file.
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
    show = actions.add_parser("show", help="print a result file's state (completed, failed, running, interrupted) "
                                           "and tables", description="Print result files' state and tables.")
    show.add_argument("runs", nargs="+", metavar="RUN.h5")
    return parser


def _show(path: str) -> str:
    """A few lines on one result file; InputError when it is not one."""
    import h5py

    from hpcbench.results.status import file_status
    from hpcbench.runtime.bounded import short_repr
    from hpcbench.runtime.paths import input_file

    input_file(path, path, "result file")
    try:
        state = file_status(path)
        with h5py.File(path, "r", locking=False) as h5:
            attrs = {k: h5.attrs[k] for k in ("kind", "start_time", "end_time", "run_id") if k in h5.attrs}
            tables = {name: int(g.attrs["rows"]) for name, g in h5.items()
                      if isinstance(g, h5py.Group) and "rows" in g.attrs}
    except (OSError, KeyError, ValueError, TypeError) as exc:
        raise InputError(f"{path}: not an hpcbench result file ({short_repr(str(exc), 120)})") from None
    text = {k: v.decode() if isinstance(v, bytes) else str(v) for k, v in attrs.items()}
    lines = [f"{path}: {text.get('kind', '?')} run, {state.status}" + (f" ({state.detail})" if state.detail else "")]
    lines += [f"  {k}: {text[k]}" for k in ("run_id", "start_time", "end_time") if k in text]
    lines += [f"  table {name}: {rows} rows" for name, rows in sorted(tables.items())]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Run ``hpcbench results ...``; returns the exit status (0 done, 2 bad input)."""
    args = _parser().parse_args(sys.argv[1:] if argv is None else argv)
    if args.action == "show":
        status = 0
        for path in args.runs:
            try:
                print(_show(path))
            except InputError as exc:
                print(f"hpcbench results: error: {exc}", file=sys.stderr)
                status = 2
        return status
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

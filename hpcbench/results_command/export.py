"""``hpcbench results export --fedscale RUN.h5 [-o OUT.pkl] [--overwrite]``: another tool's format.

Today one format: FedScale's ``testing_perf`` pickle of a federated run
(:mod:`hpcbench.fl.fedscale_export`).
"""

from __future__ import annotations

__all__ = ["add_parser", "run"]


def add_parser(actions, name: str) -> None:
    """Add ``export`` to the ``hpcbench results`` subcommands."""
    export = actions.add_parser(name, help="write a result file in another tool's format",
                                description="Write a result file in another tool's format.")
    export.add_argument("--fedscale", metavar="RUN.h5", required=True,
                        help="an hpcbench fl result file, written as FedScale's testing_perf pickle "
                             "(round -> clock, loss, top_1) for FedScale analysis scripts")
    export.add_argument("-o", "--output", metavar="OUT.pkl", default=None,
                        help="pickle to write (default RUN.testing_perf.pkl beside RUN.h5)")
    export.add_argument("--overwrite", action="store_true", help="replace an existing output file")


def run(args) -> int:
    """Write the pickle; raises InputError on a bad file."""
    from hpcbench.fl.fedscale_export import write_testing_perf

    out, history = write_testing_perf(args.fedscale, args.output, args.overwrite)
    print(f"{out}: {len(history['perf'])} evaluated rounds in FedScale's testing_perf format")
    return 0

"""``hpcbench results tensorboard RUN.h5 [RUN.h5 ...] DIR [--overwrite]``: finished runs as TensorBoard event files.

Each run folder ``DIR/<file stem>/`` follows the output rules
(:mod:`hpcbench.runtime.outputs`): checked (empty or absent without
``--overwrite``, never an input) and locked before anything is written.
"""

from __future__ import annotations

__all__ = ["add_parser", "run"]


def add_parser(actions, name: str) -> None:
    """Add ``tensorboard`` to the ``hpcbench results`` subcommands."""
    p = actions.add_parser(name, help="write finished runs' scalars and config as TensorBoard event files",
                           description="Write each run's per-round / per-step scalars (accuracy, loss, virtual "
                                       "time, throughput, busbw) and its config as text to DIR/<file stem>/, "
                                       "as --tensorboard does live; then: tensorboard --logdir DIR. Needs "
                                       "pip install -e '.[tensorboard]'.")
    p.add_argument("files", nargs="+", metavar="RUN.h5")
    p.add_argument("logdir", metavar="DIR")
    p.add_argument("--overwrite", action="store_true",
                   help="write into a run folder DIR/<file stem>/ that exists and is not empty (refused otherwise)")


def run(args) -> int:
    """Export every file; raises InputError on a bad file or without tensorboard."""
    from hpcbench.results.tensorboard import export, require_tensorboard
    from hpcbench.results_command.files import load

    from hpcbench.results.tensorboard import run_logdir
    from hpcbench.runtime.outputs import Output, check_outputs, claim_outputs

    require_tensorboard("results tensorboard")
    for path in args.files:
        load(path)
    folders = [Output("DIR", run_logdir(args.logdir, path), folder=True) for path in args.files]
    check_outputs(folders, args.overwrite, {f"RUN.h5 {i + 1}": p for i, p in enumerate(args.files)})
    claimed = claim_outputs(folders)
    try:
        for path in args.files:
            run_dir, count = export(path, args.logdir)
            print(f"{path}: {count} scalars -> {run_dir}")
    finally:
        claimed.release()
    print(f"view them with: tensorboard --logdir {args.logdir}")
    return 0

"""``hpcbench results tensorboard RUN.h5 [RUN.h5 ...] DIR``: finished runs as TensorBoard event files."""

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


def run(args) -> int:
    """Export every file; raises InputError on a bad file or without tensorboard."""
    from hpcbench.results.tensorboard import export, require_tensorboard
    from hpcbench.results_command.files import load

    require_tensorboard("results tensorboard")
    for path in args.files:
        load(path)
    for path in args.files:
        run_dir, count = export(path, args.logdir)
        print(f"{path}: {count} scalars -> {run_dir}")
    print(f"view them with: tensorboard --logdir {args.logdir}")
    return 0

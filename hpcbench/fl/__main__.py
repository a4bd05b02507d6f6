"""``python -m hpcbench.fl [CONFIG.yaml] [--KEY VALUE ...]``: run a federated emulation job.

Run it under MPI (``mpirun -np 64 python -m hpcbench.fl jobs/configs/digits.yaml``):
rank 0 aggregates, the other ranks execute the emulated clients.
Exit status: 0 on success, 2 on bad input (nothing written).
"""

from __future__ import annotations

import argparse
import sys

__all__ = ["main", "parse_args"]


def parse_args(argv: list[str]):
    """Config path and ``--dotted.key value`` overrides from the command line."""
    from hpcbench.fl.config import flatten_keys

    parser = argparse.ArgumentParser(
        prog="python -m hpcbench.fl",
        description="Emulate federated learning on MPI ranks (FedScale design) and write HDF5 results.",
        epilog="Every config key can be overridden: --rounds 20 --dataset.alpha 0.1 "
               "--traces.availability.format none")
    parser.add_argument("config", nargs="?", help="YAML job file (defaults apply where omitted)")
    for key in flatten_keys():
        parser.add_argument(f"--{key}", dest=key, metavar="VALUE", default=None,
                            help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    overrides = {k: v for k, v in vars(args).items() if k != "config" and v is not None}
    return args.config, overrides


def main(argv: list[str] | None = None) -> int:
    """Entry point; returns the exit status."""
    argv = list(sys.argv[1:] if argv is None else argv)
    from hpcbench.runtime.wakeup import block_wake_signal

    block_wake_signal()  # before mpi4py and torch start threads (see hpcbench.runtime.wakeup)
    from mpi4py import MPI

    comm = MPI.COMM_WORLD
    try:
        path, overrides = parse_args(argv)
    except SystemExit as exc:  # argparse already printed the usage error (on every rank)
        return int(exc.code or 0)
    from hpcbench.fl.config import ConfigError, load_config

    try:
        cfg = load_config(path, overrides)
    except ConfigError as exc:
        if comm.rank == 0:
            print(f"hpcbench fl: error: {exc}", file=sys.stderr)
        return 2
    from hpcbench.fl.job import run_job

    return run_job(cfg, comm)


if __name__ == "__main__":
    sys.exit(main())

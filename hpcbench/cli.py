"""The ``hpcbench`` command: one subcommand per benchmark, each a module with ``main(argv)``."""

from __future__ import annotations

import importlib
import sys

__all__ = ["SUBCOMMANDS", "main"]

#: subcommand name -> (module with ``main(argv) -> int``, one-line help)
SUBCOMMANDS: dict[str, tuple[str, str]] = {
    "fl": ("hpcbench.fl.__main__", "federated learning emulation (FedScale design on MPI ranks)"),
    "fl-bench": ("hpcbench.fl.bench", "throughput and scaling benchmark of the federated emulation"),
    "collectives": ("hpcbench.collectives.bench", "collective algorithms against MPI, gloo and Horovod"),
    "compress": ("hpcbench.collectives.compress_bench", "compressed allreduce on modelled links"),
    "costmodel": ("hpcbench.bench.costmodel", "allreduce over the link model against the alpha-beta model"),
}


def main(argv: list[str] | None = None) -> int:
    """Dispatch ``hpcbench SUBCOMMAND [args...]``; returns the exit status."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in ("-h", "--help"):
        lines = ["usage: hpcbench SUBCOMMAND [options]", "", "subcommands:"]
        lines += [f"  {name:<12} {help_}" for name, (_, help_) in SUBCOMMANDS.items()]
        print("\n".join(lines))
        return 0 if argv else 2
    name, rest = argv[0], argv[1:]
    if name not in SUBCOMMANDS:
        print(f"hpcbench: unknown subcommand {name!r}; choose from {', '.join(SUBCOMMANDS)}",
              file=sys.stderr)
        return 2
    module = importlib.import_module(SUBCOMMANDS[name][0])
    return int(module.main(rest) or 0)


if __name__ == "__main__":
    sys.exit(main())

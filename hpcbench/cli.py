"""The ``hpcbench`` command: one subcommand per runner, each a module with ``main(argv)``.

Every runner's ``main`` goes through :func:`hpcbench.runtime.lifecycle.main`
(parse and check on every rank, open the output, run, end every rank together).
"""

from __future__ import annotations

import importlib
import sys

from hpcbench.runtime.registry import Registry

__all__ = ["SUBCOMMANDS", "main"]

#: subcommand name -> (module with ``main(argv) -> int`` running the shared lifecycle, one-line help)
SUBCOMMANDS: Registry[tuple[str, str]] = Registry("subcommand", {
    "fl": ("hpcbench.fl.__main__", "federated learning emulation (FedScale design on MPI ranks)"),
    "fl-bench": ("hpcbench.bench.fl_scaling", "throughput and scaling benchmark of the federated emulation"),
    "collectives": ("hpcbench.bench.collectives.__main__",
                    "collective algorithms against MPI, gloo and Horovod (--overlap: comm hidden by compute)"),
    "compress": ("hpcbench.bench.compress.__main__",
                 "compressed allreduce on modelled links (--convergence: digits training check)"),
    "pipeline": ("hpcbench.pipeline.__main__", "pipeline stages on MPI ranks with Sky Computing's layer allocation"),
    "costmodel": ("hpcbench.bench.costmodel", "allreduce over the link model against the alpha-beta model"),
    "train": ("hpcbench.train.__main__", "data-parallel training (KungFu's benchmark) with gradient synchronisers"),
    "reproduce": ("hpcbench.reproduce.command",
                  "regenerate the figures of jobs/reproduce.yaml and check their claims (quick or full tier)"),
    "results": ("hpcbench.results_command",
                "browse and convert result files: ls, show, diff, tensorboard, export --fedscale"),
})


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
        print(f"hpcbench: {SUBCOMMANDS.unknown(name)}", file=sys.stderr)
        return 2
    module = importlib.import_module(SUBCOMMANDS[name][0])
    return int(module.main(rest) or 0)


if __name__ == "__main__":
    sys.exit(main())

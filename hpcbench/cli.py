"""The ``hpcbench`` command: one subcommand per runner, each a module with ``main(argv)``.

Every runner's ``main`` goes through :func:`hpcbench.lifecycle.main`
(parse and check on every rank, open the output, run, end every rank together).
"""

from __future__ import annotations

import importlib
import sys
from typing import NamedTuple

from hpcbench.results.kinds import KINDS, RunnerKind
from hpcbench.runtime.registry import Registry

__all__ = ["SUBCOMMANDS", "Subcommand", "load_declarations", "main"]

class Subcommand(NamedTuple):
    """One ``hpcbench`` subcommand: the module with ``main(argv) -> int`` running the shared lifecycle, its
    one-line help, and for a runner that writes results files the light module declaring their kind, headline
    figures and TensorBoard scalars (:mod:`hpcbench.results.kinds`), or None."""

    module: str
    help: str
    declaration: str | None = None


#: subcommand name -> :class:`Subcommand`; the one list of runners (``hpcbench reproduce`` and ``hpcbench
#: results`` read their declarations from here)
SUBCOMMANDS: Registry[Subcommand] = Registry("subcommand", {
    "fl": Subcommand("hpcbench.fl.__main__", "federated learning emulation (FedScale design on MPI ranks)",
                     "hpcbench.fl.declaration"),
    "fl-bench": Subcommand("hpcbench.bench.fl_scaling", "throughput and scaling benchmark of the federated emulation"),
    "collectives": Subcommand("hpcbench.bench.collectives.__main__",
                              "collective algorithms against MPI, gloo and Horovod "
                              "(--overlap: comm hidden by compute)", "hpcbench.bench.collectives.declaration"),
    "compress": Subcommand("hpcbench.bench.compress.__main__",
                           "compressed allreduce on modelled links (--convergence: digits training check)",
                           "hpcbench.bench.compress.declaration"),
    "pipeline": Subcommand("hpcbench.pipeline.__main__",
                           "pipeline stages on MPI ranks with Sky Computing's layer allocation",
                           "hpcbench.pipeline.declaration"),
    "costmodel": Subcommand("hpcbench.bench.costmodel", "allreduce over the link model against the alpha-beta model",
                            "hpcbench.bench.costmodel_declaration"),
    "train": Subcommand("hpcbench.train.__main__",
                        "data-parallel training (KungFu's benchmark) with gradient synchronisers",
                        "hpcbench.train.declaration"),
    "reproduce": Subcommand("hpcbench.reproduce.command",
                            "regenerate the figures of jobs/reproduce.yaml and check their claims (quick or full tier)"),
    "results": Subcommand("hpcbench.results_command",
                          "browse and convert result files: ls, show, diff, tensorboard, export --fedscale"),
})


def load_declarations() -> dict[str, RunnerKind]:
    """Subcommand -> its runner's declaration, for every subcommand that has one (each declaration module is
    imported, registering its kind in :data:`hpcbench.results.kinds.KINDS`).

    Raises
    ------
    ValueError
        A declaration whose kind is not its subcommand's name.
    """
    out = {}
    for name, sub in SUBCOMMANDS.items():
        if sub.declaration is None:
            continue
        importlib.import_module(sub.declaration)
        out[name] = KINDS[name]
    return out


def main(argv: list[str] | None = None) -> int:
    """Dispatch ``hpcbench SUBCOMMAND [args...]``; returns the exit status."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in ("-h", "--help"):
        lines = ["usage: hpcbench SUBCOMMAND [options]", "", "subcommands:"]
        lines += [f"  {name:<12} {sub.help}" for name, sub in SUBCOMMANDS.items()]
        print("\n".join(lines))
        return 0 if argv else 2
    name, rest = argv[0], argv[1:]
    if name not in SUBCOMMANDS:
        print(f"hpcbench: {SUBCOMMANDS.unknown(name)}", file=sys.stderr)
        return 2
    module = importlib.import_module(SUBCOMMANDS[name].module)
    return int(module.main(rest) or 0)


if __name__ == "__main__":
    sys.exit(main())

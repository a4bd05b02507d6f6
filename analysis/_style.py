"""The one plotting style of the figure scripts: command line, matplotlib set-up, colours, saving.

Every ``analysis/*.py`` script takes result files and ``-o FIG.png`` (repeat
``-o`` for more formats: ``-o fig.png -o fig.pdf``; the format follows the
extension), draws with the same fonts, grid and colours, and reads HDF5
only (never MPI). Scripts import this module as ``_style``: Python puts a
script's own folder first on ``sys.path``, so nothing edits it.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Callable, Sequence

__all__ = ["figure_parser", "outputs", "finish", "pyplot", "save_figure", "load_all", "color_for", "plain_log", "bytes_axis",
           "DPI"]

#: resolution of raster outputs (PNG)
DPI = 130

_RC = {"font.size": 9, "axes.titlesize": 10, "axes.labelsize": 9, "legend.fontsize": 8, "axes.grid": True,
       "grid.alpha": 0.3, "figure.constrained_layout.use": False, "savefig.bbox": "tight"}


def figure_parser(doc: str, default_output: str, files_help: str = "hpcbench result files (.h5)"
                  ) -> argparse.ArgumentParser:
    """An argument parser with the result ``files`` and ``-o/--output`` (repeatable, default ``default_output``).

    Read ``args.outputs`` (a list of paths) after parsing.
    """
    parser = argparse.ArgumentParser(description=doc.split("\n\n")[0])
    parser.add_argument("files", nargs="+", type=Path, help=files_help)
    parser.add_argument("-o", "--output", type=Path, action="append", default=None, dest="output",
                        help=f"figure file; repeat for more formats, e.g. -o fig.png -o fig.pdf "
                             f"(default {default_output})")
    parser.set_defaults(default_output=Path(default_output))
    return parser


def outputs(args) -> list[Path]:
    """The ``-o`` paths of parsed ``args`` (the default when none was given)."""
    return list(args.output or [args.default_output])


def pyplot():
    """matplotlib's pyplot on the Agg backend (no display needed) with the shared style applied."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    plt.rcParams.update(_RC)
    return plt


def save_figure(fig, paths: Path | Sequence[Path], inputs: Sequence[Path] = ()) -> None:
    """Write ``fig`` to every path (PNG at :data:`DPI`), then close it; the rules of ``hpcbench.runtime.outputs``.

    The paths are checked together first (a regular file or absent, an
    existing figure is replaced, none is one of ``inputs``, none ends with
    ``/``; folders of a relative path are created), locked, and each is
    written through a temporary file renamed over it. A path that breaks a
    rule prints one line and raises ``SystemExit(2)`` before any is written.
    """
    from hpcbench.runtime.errors import InputError
    from hpcbench.runtime.outputs import Output, check_outputs, claim_outputs, replace_atomically

    plt = pyplot()
    declared = [Output("-o", p) for p in ([paths] if isinstance(paths, (str, Path)) else paths)]
    try:
        check_outputs(declared, overwrite=True, inputs={f"input {i + 1}": p for i, p in enumerate(inputs)})
        claimed = claim_outputs(declared)
    except InputError as exc:
        print(f"{Path(sys.argv[0]).name}: error: {exc}", file=sys.stderr)
        raise SystemExit(2) from None
    try:
        for out in declared:
            kind = out.p.suffix.lstrip(".") or plt.rcParams["savefig.format"]
            replace_atomically(out.p, lambda tmp: fig.savefig(tmp, dpi=DPI, format=kind))
    finally:
        claimed.release()
    plt.close(fig)


def finish(fig, args, tight: bool = True) -> int:
    """Lay out ``fig``, write it to every ``-o`` path of ``args``, say where; returns 0 (the exit status)."""
    if tight:
        fig.tight_layout()
    paths = outputs(args)
    save_figure(fig, paths, getattr(args, "files", ()))
    print(f"figure: {', '.join(map(str, paths))}")
    return 0


def load_all(paths: Sequence[Path], load: Callable[[Path], object], prog: str) -> list:
    """``load(path)`` of every file; a missing or foreign file prints one line and raises ``SystemExit(2)``."""
    out = []
    for path in paths:
        if not Path(path).is_file():
            print(f"{prog}: error: {path}: no such file", file=sys.stderr)
            raise SystemExit(2)
        try:
            out.append(load(Path(path)))
        except (OSError, KeyError, ValueError) as exc:
            print(f"{prog}: error: {exc}", file=sys.stderr)
            raise SystemExit(2) from None
    return out


#: fixed colours of the names most figures share; others get a colour from a hash of the name
_PALETTE = {"mpi": "C0", "ring": "C1", "auto": "C2", "rabenseifner": "C3", "gloo": "C4", "horovod": "C5",
            "ddp": "C6", "even": "C0", "sky-dynamic": "C1", "sky-milp": "C2", "optimal": "C3", "adaptive": "C4",
            "random": "C0", "oort": "C1", "none": "C7", "topk": "C1", "thresholdv": "C2"}


def color_for(name: str) -> str:
    """The same colour for the same name (implementation, synchroniser, allocator) in every figure and run."""
    import zlib

    return _PALETTE.get(name) or f"C{zlib.crc32(name.encode()) % 10}"


def plain_log(ax, axis: str = "y") -> None:
    """A log-scaled axis labelled with plain numbers (``2``, ``20``) instead of powers of ten."""
    from matplotlib.ticker import FormatStrFormatter, LogLocator

    target = ax.yaxis if axis == "y" else ax.xaxis
    target.set_major_locator(LogLocator(base=10, subs=(1.0, 1.5, 2.0, 3.0, 5.0, 7.0)))
    target.set_major_formatter(FormatStrFormatter("%g"))
    target.set_minor_formatter(FormatStrFormatter(""))


def bytes_axis(ax, axis: str = "x") -> None:
    """A log2-scaled axis of message sizes labelled ``1K``, ``64K``, ``16M`` (powers of 1024)."""
    from matplotlib.ticker import FuncFormatter, LogLocator

    def label(value, _pos) -> str:
        for unit, scale in (("G", 1 << 30), ("M", 1 << 20), ("K", 1 << 10)):
            if value >= scale:
                return f"{value / scale:g}{unit}"
        return f"{value:g}"

    target = ax.xaxis if axis == "x" else ax.yaxis
    (ax.set_xscale if axis == "x" else ax.set_yscale)("log", base=2)
    target.set_major_locator(LogLocator(base=4))
    target.set_major_formatter(FuncFormatter(label))

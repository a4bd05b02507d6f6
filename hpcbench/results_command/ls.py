"""``hpcbench results ls [DIR ...]``: one line per results file."""

from __future__ import annotations

__all__ = ["add_parser", "run", "rows"]

HEADER = ("file", "runner", "job", "status", "ranks", "start", "key figure")


def add_parser(actions, name: str) -> None:
    """Add ``ls`` to the ``hpcbench results`` subcommands."""
    p = actions.add_parser(name, help="one line per results file: runner, job, status, ranks, start, key figure",
                           description="List hpcbench results files (recursively under each DIR, default "
                                       "results/): runner, job, status, ranks, start, key figure.")
    p.add_argument("paths", nargs="*", default=["results"], metavar="DIR", help="folders or files (default results)")


def _key_figure(path, attrs) -> str:
    from hpcbench.results.headlines import headlines
    from hpcbench.runtime.texttable import NA, fmt

    try:
        found = headlines(path, attrs)
    except (OSError, KeyError, ValueError) as exc:
        return f"n/a (unreadable table: {exc})"
    if not found:
        return ""
    h = found[0]
    unit = f" {h.unit}" if h.unit and not isinstance(h.value, NA) else ""
    return f"{h.name} {fmt(h.value, '.4g')}{unit}"


def rows(paths) -> list[tuple]:
    """The listing's rows (:data:`HEADER`), one per ``.h5`` file under ``paths``.

    A file that is not an hpcbench results file gets a row saying so.
    """
    from hpcbench.results.status import run_status
    from hpcbench.results_command.files import find, load
    from hpcbench.runtime.errors import InputError

    out = []
    for path in find(paths):
        try:
            attrs = load(path)
        except InputError as exc:
            out.append((str(path), "", "", f"unreadable: {exc}", "", "", ""))
            continue
        job = attrs.get("job_name") or attrs.get("config", {}).get("job_name", "")
        out.append((str(path), str(attrs.get("kind", "")), str(job), str(run_status(path, attrs).state),
                    attrs.get("world_size", ""), str(attrs.get("start_time", "")), _key_figure(path, attrs)))
    return out


def run(args) -> int:
    """Print the listing."""
    from hpcbench.runtime.texttable import render

    found = rows(args.paths)
    if not found:
        print(f"no .h5 files under {', '.join(args.paths)}")
        return 0
    for line in render(HEADER, found, formats=("s", "s", "s", "s", "d", "s", "s")):
        print(line)
    return 0

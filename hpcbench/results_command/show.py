"""``hpcbench results show RUN.h5``: provenance, config, tables with units, headline figures."""

from __future__ import annotations

import json

__all__ = ["add_parser", "run", "describe"]

#: root attributes shown under "config" or elsewhere, not among the provenance lines
_NOT_PROVENANCE = ("config", "config_json", "config_yaml", "status", "error", "end_time", "kind", "schema_version")


def add_parser(actions, name: str) -> None:
    """Add ``show`` to the ``hpcbench results`` subcommands."""
    p = actions.add_parser(name, help="provenance, config, tables with units, headline figures of one file",
                           description="Show one results file: status, provenance, config, every table "
                                       "(columns with units, first rows) and the runner's headline figures.")
    p.add_argument("file", metavar="RUN.h5")
    p.add_argument("--rows", default="5", metavar="N",
                   help="rows printed per table (a number, or 'all'; default 5)")


def _value(v) -> str:
    if isinstance(v, (list, tuple)) or (hasattr(v, "tolist") and not isinstance(v, str)):
        v = v.tolist() if hasattr(v, "tolist") else v
        return json.dumps(v)
    from hpcbench.runtime.texttable import fmt

    if isinstance(v, int) and not isinstance(v, bool):
        return str(v)
    return fmt(v, ".6g")


def _table_lines(h5, name: str, limit: int | None) -> list[str]:
    from hpcbench.results.reader import read_table, table_columns
    from hpcbench.runtime.texttable import render

    group = h5[name]
    rows = int(group.attrs.get("rows", 0))
    lines = [f"  {name}: {rows} rows. {group.attrs.get('description', '')}".rstrip()]
    meta = table_columns(h5, name)
    units = {c: u for c, (u, _) in meta.items()}
    cols = [(c, u, d) for c, (u, d) in meta.items()]
    lines += ["    " + line for line in render(("column", "units", "meaning"), cols)]
    if rows and limit != 0:
        data = read_table(h5, name)
        shown = rows if limit is None else min(rows, limit)
        body = [[data[c][i] for c in units] for i in range(shown)]
        lines.append(f"    first {shown} of {rows} rows:" if shown < rows else f"    all {rows} rows:")
        lines += ["      " + line for line in render(list(units), body, units=[f"({u})" if u else "" for u in
                                                                             units.values()])]
    return lines


def describe(path, limit: int | None = 5) -> list[str]:
    """The lines ``show`` prints for results file ``path`` (``limit`` rows per table; None: all).

    Raises
    ------
    InputError
        ``path`` is missing or not an hpcbench results file.
    """
    import h5py

    from hpcbench.results.headlines import headlines
    from hpcbench.results.reader import read_consistent
    from hpcbench.results.status import run_status
    from hpcbench.results_command.files import load
    from hpcbench.runtime.texttable import NA, render

    attrs = load(path)
    lines = [f"{path}: hpcbench {attrs.get('kind', '?')} results (schema {attrs.get('schema_version')})",
             f"status: {run_status(path, attrs)}", "", "provenance:"]
    prov = [(k, _value(v)) for k, v in sorted(attrs.items()) if k not in _NOT_PROVENANCE]
    lines += ["  " + line for line in render(("attribute", "value"), prov)[1:]]
    lines += ["", "config:"] + ["  " + line for line in str(attrs.get("config_yaml", "")).rstrip().splitlines()]
    lines += ["", "tables:"]
    def tables(h5) -> list[str]:
        out = []
        for name in sorted(h5.keys()):
            item = h5[name]
            if isinstance(item, h5py.Group) and "columns" in item.attrs:
                out += _table_lines(h5, name, limit)
            elif isinstance(item, h5py.Group):
                for sub, ds in item.items():
                    out.append(f"  {name}/{sub}: array {ds.shape} {ds.dtype} ({ds.attrs.get('units', '')}) "
                               f"{ds.attrs.get('description', '')}".rstrip())
            else:
                out.append(f"  {name}: array {item.shape} {item.dtype} ({item.attrs.get('units', '')}) "
                           f"{item.attrs.get('description', '')}".rstrip())
        return out

    try:
        lines += read_consistent(path, tables)
    except (OSError, KeyError, ValueError, RuntimeError) as exc:  # a file a failed write left damaged
        lines.append(f"  n/a (the tables cannot be read: {type(exc).__name__}: {exc})")
    try:
        heads = headlines(path, attrs)
    except (OSError, KeyError, ValueError, RuntimeError) as exc:
        heads = []
        lines += ["", f"headline figures: n/a ({type(exc).__name__}: {exc})"]
    if heads:
        lines += ["", "headline figures:"]
        lines += ["  " + line for line in render(
            ("figure", "value", "unit"), [(h.name, h.value, "" if isinstance(h.value, NA) else h.unit)
                                         for h in heads])]
    return lines


def run(args) -> int:
    """Print the description; raises InputError on a bad file or --rows."""
    from hpcbench.runtime.errors import InputError

    if args.rows == "all":
        limit = None
    else:
        try:
            limit = int(args.rows)
        except ValueError:
            raise InputError(f"--rows: expected a number or 'all', got {args.rows!r}") from None
        if limit < 0:
            raise InputError(f"--rows: must be >= 0, got {limit}")
    print("\n".join(describe(args.file, limit)))
    return 0

"""``hpcbench results diff A.h5 B.h5``: config, provenance and headline figures side by side."""

from __future__ import annotations

import json

__all__ = ["add_parser", "run", "flatten", "compare"]

#: provenance attributes worth comparing between two runs
_PROVENANCE = ("kind", "status", "world_size", "hostnames", "start_time", "git_commit", "hpcbench_version",
               "mpi_library_version", "mpi4py_version", "torch_version", "numpy_version", "slurm_job_id",
               "slurm_job_nodelist", "compute_mode", "time_dilation", "oversubscribed")


def add_parser(actions, name: str) -> None:
    """Add ``diff`` to the ``hpcbench results`` subcommands."""
    p = actions.add_parser(name, help="config and headline figures of two files side by side",
                           description="Compare two results files: the config keys that differ, provenance, "
                                       "and the headline figures side by side with B / A.")
    p.add_argument("a", metavar="A.h5")
    p.add_argument("b", metavar="B.h5")
    p.add_argument("--all", action="store_true", help="list every config key, equal ones too")


def flatten(config, prefix: str = "") -> dict[str, str]:
    """Nested config as ``{"dotted.key": "value as JSON"}`` (lists kept whole)."""
    out: dict[str, str] = {}
    if isinstance(config, dict):
        for key, value in config.items():
            out.update(flatten(value, f"{prefix}{key}."))
        return out
    out[prefix[:-1]] = json.dumps(config)
    return out


def compare(a: dict[str, str], b: dict[str, str], everything: bool = False) -> list[tuple[str, str, str]]:
    """``(key, A's value, B's value)`` for keys that differ (all keys with ``everything``); missing: ``-``."""
    keys = sorted(set(a) | set(b))
    return [(k, a.get(k, "-"), b.get(k, "-")) for k in keys if everything or a.get(k) != b.get(k)]


def run(args) -> int:
    """Print the comparison; raises InputError on a bad file."""
    from hpcbench.results.headlines import headlines
    from hpcbench.results_command.files import load
    from hpcbench.runtime.texttable import NA, render

    ca, cb = load(args.a), load(args.b)
    print(f"A: {args.a}\nB: {args.b}")
    fa, fb = flatten(ca.get("config", {})), flatten(cb.get("config", {}))
    rows = compare(fa, fb, args.all)
    same = len(set(fa) | set(fb)) - sum(1 for k, x, y in rows if x != y)
    print(f"\nconfig: {sum(1 for _, x, y in rows if x != y)} keys differ, {same} equal"
          + ("" if args.all else " (--all lists them)"))
    if rows:
        print("\n".join("  " + line for line in render(("key", "A", "B"), rows)))
    prov = [(k, str(ca.get(k, "-")), str(cb.get(k, "-"))) for k in _PROVENANCE if k in ca or k in cb]
    print("\nprovenance:")
    print("\n".join("  " + line for line in render(("attribute", "A", "B"), prov)))
    ha = {h.name: h for h in headlines(args.a, ca)}
    hb = {h.name: h for h in headlines(args.b, cb)}
    names = list(dict.fromkeys([*ha, *hb]))
    if names:
        table = []
        for name in names:
            x = ha[name].value if name in ha else NA("not in A")
            y = hb[name].value if name in hb else NA("not in B")
            try:
                ratio = float(y) / float(x) if float(x) != 0 else NA("A is 0")
            except (TypeError, ValueError):
                ratio = NA("not numbers")
            unit = (ha.get(name) or hb.get(name)).unit
            table.append((name, x, y, ratio, unit))
        print("\nheadline figures:")
        print("\n".join("  " + line for line in render(("figure", "A", "B", "B / A", "unit"), table,
                                                      formats=("s", ".4g", ".4g", ".3f", "s"))))
    return 0

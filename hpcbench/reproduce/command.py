"""``hpcbench reproduce [FIGURE ...] --tier quick|full [--launcher local|slurm] [--out DIR] [--list]``.

Regenerates the manifest's figures (``jobs/reproduce.yaml`` by default):
launches every run that is not up to date (locally with ``mpiexec``, or one
``sbatch`` per run with the drawing as a dependent job), draws each figure,
checks every claim, prints ``figure | claim | threshold | measured |
result | docs | files`` (the threshold's verdict, agreement with the value
the docs state, and whether the files came from this code), and writes
``OUT/report.html``. A results file made by other code is run again unless
``--reuse`` keeps it. Exit status 0 when every claim
passes and every figure is drawn, 1 when a claim fails or a run or drawing
fails, 2 on a bad manifest or bad arguments (the message names the entry),
130 after Ctrl-C (the running job's process group ended, its ledger line and
the report of what was done written).
"""

from __future__ import annotations

import argparse
import os
import shlex
import sys
import time
from pathlib import Path

from hpcbench.reproduce.local import INTERRUPTED
from hpcbench.runtime.errors import InputError

__all__ = ["main"]


class _Parser(argparse.ArgumentParser):
    def error(self, message: str):  # noqa: D102 - argparse API: usage errors exit 2
        self.print_usage(sys.stderr)
        self.exit(2, f"{self.prog}: error: {message}\n")


def _parser() -> argparse.ArgumentParser:
    from hpcbench.reproduce.manifest import ROOT

    p = _Parser(prog="hpcbench reproduce", description=__doc__.split("\n\n")[1].replace("\n", " "),
                formatter_class=argparse.RawDescriptionHelpFormatter,
                epilog="The manifest's format and how to add a figure: docs/reproduce.md.")
    p.add_argument("figures", nargs="*", metavar="FIGURE", help="figures to make (default: all)")
    p.add_argument("--tier", choices=("quick", "full"), default="quick",
                   help="quick: reduced sizes, every figure in about 30 min on 2 cores; full: the papers' sizes")
    p.add_argument("--launcher", choices=("local", "slurm"), default="local",
                   help="local: mpiexec here, one job at a time; slurm: one sbatch per run, the drawing after them")
    p.add_argument("--out", type=Path, default=None, help="output folder (default results/reproduce-TIER)")
    p.add_argument("--manifest", type=Path, default=ROOT / "jobs" / "reproduce.yaml", help="the manifest")
    p.add_argument("--list", action="store_true", help="list figures, jobs, ranks, expected times and claims; run "
                                                       "nothing")
    p.add_argument("--force", action="store_true", help="run every job, even those whose results are up to date")
    p.add_argument("--reuse", action="store_true",
                   help="keep results files made by the same settings but other code (another commit, uncommitted "
                        "changes, other versions); the claims computed from them say so")
    p.add_argument("--shared-nodes", action="store_true",
                   help="slurm: let runs share nodes (default --exclusive: timed runs never share cores)")
    p.add_argument("--nodes", type=_positive, default=None, metavar="N",
                   help="spread each run without nodes: in the manifest over min(N, ranks) nodes (slurm: sbatch "
                        "--nodes; local: hosts emulated on this machine, root)")
    p.add_argument("--sbatch-arg", action="append", default=[], metavar="OPTION",
                   help="slurm: an extra sbatch option (--sbatch-arg=--partition=debug); repeatable")
    return p


def _positive(text: str) -> int:
    """An integer >= 1 (argparse type: anything else is a usage error, exit 2)."""
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected an integer >= 1, got {text!r}")
    return value


def _local_hosts_problem(plan) -> str:
    """Why the local launcher cannot run the plan's runs of several nodes (emulated hosts), or ``""``."""
    spread = [r for r in plan.runs if r.nodes is not None and r.nodes > 1]
    if not spread:
        return ""
    from hpcbench.runtime.emulated_hosts import unavailable_reason

    why = unavailable_reason()
    return (f"{spread[0].key}: nodes: {spread[0].nodes} runs on hosts emulated on this machine with --launcher "
            f"local, which cannot be done here ({why}); use --launcher slurm") if why else ""


def _minutes(seconds: float) -> str:
    return f"{seconds / 60:.1f} min" if seconds >= 90 else f"{seconds:.0f} s"


def _listing(manifest, plans: dict) -> list[str]:
    from hpcbench.runtime.texttable import render

    lines = []
    for name, fig in manifest.figures.items():
        if name not in plans["quick"].figures and name not in plans["quick"].unavailable:
            continue
        lines += [f"{name}: {fig.title}", f"  mirrors: {fig.paper}", f"  drawn by: {fig.analysis.script}"]
        if name in plans["quick"].unavailable:
            why = plans["quick"].unavailable[name]
            full_only = name in plans["full"].figures
            lines.append("  quick tier: none, full tier only" if full_only else f"  n/a here: {why}")
        rows = []
        for job in fig.jobs:
            row = [job.id, job.runner]
            for tier in ("quick", "full"):
                runs = plans[tier].runs_of(name, job.id)
                ranks = sorted({r.ranks for r in runs})
                row += [len(runs), ",".join(map(str, ranks)) or "-", _minutes(sum(r.expected_s for r in runs))
                        if runs else "-"]
            rows.append(row)
        table = render(("job", "runner", "quick runs", "ranks", "expected", "full runs", "ranks", "expected"), rows,
                       formats=("s", "s", "d", "s", "s", "d", "s", "s"))
        lines += ["  " + line for line in table]
        if fig.claims:
            claims = [(c.name, c.threshold_text(), c.states_text() + (f" +- {c.tolerance:g}" if c.tolerance else "")
                       if c.states is not None else "-", "full tier only" if c.full_only else "quick and full",
                       c.mirrors) for c in fig.claims]
            lines += ["  " + line for line in render(("claim", "threshold", "docs state", "tiers", "mirrors"),
                                                     claims)]
        lines.append("")
    for tier in ("quick", "full"):
        plan = plans[tier]
        lines.append(f"{tier} tier: {len(plan.runs)} runs, expected {_minutes(plan.expected_s)} of runs on a "
                     f"2-core machine, largest {max((r.ranks for r in plan.runs), default=0)} ranks")
    return lines


def _say(line: str) -> None:
    print(line, flush=True)


def main(argv: list[str] | None = None) -> int:
    """Run ``hpcbench reproduce``; returns the exit status (0 all pass, 1 a failure, 2 bad input)."""
    argv = list(sys.argv[1:] if argv is None else argv)
    args = _parser().parse_args(argv)
    from hpcbench.reproduce.manifest import load_manifest
    from hpcbench.reproduce.plan import make_plan

    out = (args.out or Path("results") / f"reproduce-{args.tier}").resolve()   # jobs run in the repository root
    try:
        manifest = load_manifest(args.manifest)
        plans = {t: make_plan(manifest, t, out, args.figures or None, args.nodes) for t in ("quick", "full")}
        problem = "" if args.list or args.launcher != "local" else _local_hosts_problem(plans[args.tier])
        if problem:
            raise InputError(problem)
    except InputError as exc:
        print(f"hpcbench reproduce: error: {exc}", file=sys.stderr)
        return 2
    if args.list:
        print("\n".join(_listing(manifest, plans)))
        return 0
    from hpcbench.runtime.outputs import Output, check_outputs, claim_outputs

    try:   # one session per folder: a second one on the same --out is refused before it touches anything
        _check_out(out)
        folder = Output("--out", out, folder=True, may_exist=True)
        check_outputs([folder], overwrite=False)
        claimed = claim_outputs([folder])
    except InputError as exc:
        print(f"hpcbench reproduce: error: {exc}", file=sys.stderr)
        return 2
    try:
        return _reproduce(args, argv, manifest, plans[args.tier], out)
    except InputError as exc:
        print(f"hpcbench reproduce: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:       # a second Ctrl-C while the report was written
        print("hpcbench reproduce: interrupted", file=sys.stderr)
        return INTERRUPTED
    finally:
        claimed.release()


def _check_out(out: Path) -> None:
    """``--out`` as a folder this process can create files in (created if missing), or an InputError.

    Raises
    ------
    InputError
        ``--out`` names a file (or something else that is not a folder), or
        the folder cannot be created or written (read-only file system,
        permissions); nothing is left behind.
    """
    import tempfile

    if out.exists() and not out.is_dir():
        raise InputError(f"--out: {str(out)!r} is a file, not a folder")
    created = not out.exists()
    try:
        out.mkdir(parents=True, exist_ok=True)
        fd, probe = tempfile.mkstemp(dir=out, prefix=".write-check-")
        os.close(fd)
        os.unlink(probe)
    except OSError as exc:
        if created:
            try:
                out.rmdir()
            except OSError:
                pass
        raise InputError(f"--out: cannot write in {str(out)!r}: {exc.strerror or exc}") from None


def _reproduce(args, argv: list[str], manifest, plan, out: Path) -> int:
    from hpcbench.reproduce.claims import HEADER, ClaimResult, check_claim, mark_files, table_rows
    from hpcbench.reproduce.identity import short
    from hpcbench.reproduce.data import FigureData
    from hpcbench.reproduce.ledger import Ledger
    from hpcbench.reproduce.machine import describe_machine
    from hpcbench.reproduce.report import write_report
    from hpcbench.reproduce.session import Session
    from hpcbench.runtime.texttable import render

    python = sys.executable
    if args.launcher == "slurm":
        from hpcbench.reproduce.slurm import SlurmLauncher

        launcher = SlurmLauncher(python, out, exclusive=not args.shared_nodes,
                                 sbatch_args=args.sbatch_arg)
    else:
        from hpcbench.reproduce.local import LocalLauncher

        launcher = LocalLauncher(python)
    t0, load0 = time.monotonic(), [round(x, 2) for x in os.getloadavg()]
    for name, why in plan.unavailable.items():
        _say(f"figure {name}: n/a ({why})")
    _say(f"hpcbench reproduce: {plan.tier} tier, {len(plan.figures)} figures, {len(plan.runs)} runs "
         f"(expected {_minutes(plan.expected_s)}), launcher {launcher.name}, output {out}, "
         f"load average {' '.join(map(str, load0))}")
    session = Session(plan, Ledger(out / "ledger.jsonl"), launcher, force=args.force, say=_say, reuse=args.reuse)
    _say(f"code: {short(session.code)}{' (tree has uncommitted changes)' if session.code['dirty'] else ''}, "
         f"python {session.code['python']}, torch {session.code['torch']}, numpy {session.code['numpy']}, "
         f"mpi4py {session.code['mpi4py']}, {session.code['mpi_library']}")
    interrupted = False
    try:
        session.execute()
    except KeyboardInterrupt:       # the running command is ended and in the ledger: report what was done
        interrupted = True
        _say("hpcbench reproduce: interrupted (Ctrl-C); the report shows what was done")
    reused: dict[str, dict[str, str]] = {}
    for o in session.runs.values():
        if o.other_code is not None:
            reused.setdefault(o.run.figure, {})[o.run.job.id] = short(o.other_code)
    results = [mark_files(check_claim(name, claim, FigureData(plan.runs_of(name)), plan.tier),
                          reused.get(name, {}))
               for name in plan.figures for claim in manifest.figures[name].claims]
    results += [ClaimResult(name, claim, "n/a", None, "n/a", why)
                for name, why in plan.unavailable.items() for claim in manifest.figures[name].claims]
    wall = time.monotonic() - t0
    _say("")
    for line in render(HEADER, table_rows(results)):
        _say(line)
    failed_runs = [o for o in session.runs.values() if not o.ok]
    undrawn = [d for d in session.draws.values() if d.state != "drawn"]
    failed_claims = [r for r in results if r.verdict == "FAIL"]
    command = shlex.join(["hpcbench", "reproduce", *argv])
    report = write_report(out / "report.html", manifest, plan, session, results, describe_machine(), command,
                          launcher.name, wall, load0)
    _say("")
    drifted = sum(r.doc.startswith("doc drifted") for r in results)
    stale = sum(r.files != "this code" for r in results)
    _say(f"claims: {sum(r.verdict == 'PASS' for r in results)} PASS, {len(failed_claims)} FAIL, "
         f"{sum(r.verdict == 'n/a' for r in results)} n/a; docs: {drifted} drifted of "
         f"{sum(r.claim.states is not None for r in results)} stated; "
         + (f"{stale} computed from other code's files (--reuse); " if stale else "")
         + f"runs: {len(failed_runs)} failed or not run; "
         f"figures: {len(plan.figures) - len(undrawn)} of {len(plan.figures)} drawn"
         + (f", {len(plan.unavailable)} n/a" if plan.unavailable else "") + f"; wall time {_minutes(wall)}")
    _say(f"report: {report}")
    if interrupted:
        return INTERRUPTED
    return 1 if failed_claims or failed_runs or undrawn else 0


"""Throughput and scaling benchmark of the federated emulation (``hpcbench fl-bench``).

Launched without ``mpiexec`` (``hpcbench fl-bench --np 3,64`` or
``python -m hpcbench.bench.fl_scaling``): it starts the ``mpiexec`` jobs itself.
Flags it does not know are handed on to every ``python -m hpcbench.fl`` job.

Runs the same job (default: 1,000 registered digits clients, 100 participants
per round, always available so that every round has its 100) under
``mpiexec -n N`` for each N of ``--np`` in one invocation, and prints side by
side, per world size:

- clients trained per second (aggregated participants per steady-state round
  divided by its wall time);
- the share of wall time spent outside client training: ``1 - sum(train CPU
  s) / (wall s * min(cores, executors))``, i.e. the part of the CPU capacity
  the executors could use that went to anything but training (messaging,
  aggregation, evaluation, waiting);
- peak resident memory per rank (max and mean over ranks);
- the steady-state round time (median round wall time, first rounds excluded)
  and its ratio to the first world size's (target at -np 64 vs -np 3: <= 1.3).

``--client-training`` names the client-training engines (``numpy``, the
default, ``sequential``, ``batched``; comma-separated): the first runs at
every world size and is the one compared with Flower; the others run at the
first world size only, for their round time side by side. ``numpy`` keeps
every rank free of torch (about 220 MB of private memory per process); it
trains ``mlp``/``logreg`` in synchronous jobs without compression (a job it
does not support exits 2 naming ``client_training``).

It also builds a 1,000,000-client registry in-process and reports the bytes
of client metadata and the process's resident-memory growth.

With ``--flower PYTHON`` (or ``auto`` when this Python can import Flower) it
then runs Flower's simulation on the same task and prints both sides' steady
round time and process-tree memory, RSS and PSS, with the ratios
(:mod:`hpcbench.bench.flower_compare`; docs/fl.md).
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

from hpcbench.runtime.errors import InputError
from hpcbench.runtime.lifecycle import Job, fault_point

__all__ = ["FLScalingJob", "main"]


def _run(np_: int, rounds: int, clients: int, participants: int, outdir: Path, extra: list[str],
         engine: str = "numpy"):
    """Run the job under ``mpiexec -n np_`` with client-training ``engine``.

    Returns its results file and the peak memory of its process tree.
    """
    from hpcbench.bench.process_memory import TreeSampler
    from hpcbench.runtime.launch import end_process_group, start_mpi

    name = f"fl-bench-np{np_}-{engine}"
    out = outdir / f"{name}.h5"
    args = ["-m", "hpcbench.fl", *_job_flags(rounds, clients, participants, out, extra, engine, name)]
    log = outdir / f"{name}.log"
    with open(log, "w") as f:
        # its own session, so that the ranks go with it if this process is interrupted
        proc = start_mpi(np_, args, stdout=f, stderr=subprocess.STDOUT)
        cmd = proc.args
        try:
            with TreeSampler(proc.pid) as sampler:
                rc = proc.wait()
        finally:
            end_process_group(proc)
    if rc != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed ({rc}):\n{log.read_text()[-3000:]}")
    return out, sampler.peak()


#: largest world size --np may name
MAX_NP = 4096


def _job_flags(rounds: int, clients: int, participants: int, out: Path, extra: list[str], engine: str,
               name: str) -> list[str]:
    """The command line of one launched ``hpcbench.fl`` job (``extra``: the flags fl-bench hands on)."""
    return ["--client_training", engine, "--job_name", name, "--rounds", str(rounds),
            "--participants", str(participants), "--dataset.num_clients", str(clients),
            "--dataset.samples_per_client", "20", "--traces.availability.format", "none",
            "--traces.availability.path", "bundled", "--eval_interval", str(rounds), "--progress", "false",
            "--output", str(out), *extra]


def _check_job_flags(argv: list[str]) -> None:
    """Parse and validate a launched job's flags in-process (its parser and config), launching nothing.

    Raises
    ------
    InputError
        What the job itself would exit 2 on, naming the flag.
    """
    from hpcbench.fl.config import FLConfig
    from hpcbench.runtime.config import add_config_arguments, config_overrides, load_config
    from hpcbench.runtime.lifecycle import RankParser, UsageError

    parser = RankParser(prog="hpcbench fl (launched by fl-bench)")
    parser.add_argument("--fedscale-conf", default=None)
    parser.add_argument("--resume", default=None)
    add_config_arguments(parser, FLConfig)
    try:
        args = parser.parse_args(argv)
    except UsageError as exc:
        raise InputError(str(exc).splitlines()[-1]) from None
    if args.fedscale_conf is not None or args.resume is not None:
        raise InputError("--fedscale-conf and --resume cannot be handed on to fl-bench's jobs")
    load_config(FLConfig, args.config, config_overrides(args))


def _measure(path: Path, memory, warmup: int) -> dict:
    from hpcbench.bench.flower_compare import ranks_only
    from hpcbench.results import read_attrs, read_table

    rounds = read_table(path, "rounds")
    clients = read_table(path, "clients")
    ranks = read_table(path, "ranks")
    attrs = read_attrs(path)
    steady = rounds["round"] > warmup
    wall = rounds["round_wall_s"][steady]
    in_steady = np.isin(clients["round"], rounds["round"][steady])
    cpu = clients["train_cpu_s"][in_steady].sum()
    executors = max(1, attrs["world_size"] - 1)
    capacity = min(os.cpu_count() or 1, executors)
    return {
        "np": attrs["world_size"], "engine": attrs["config"]["client_training"],
        "round_s": float(np.median(wall)),
        "clients_per_s": float(rounds["participants"][steady].sum() / wall.sum()),
        "outside": float(1.0 - cpu / (wall.sum() * capacity)),
        "rss_max": float(ranks["peak_rss_bytes"].max()),
        "rss_mean": float(ranks["peak_rss_bytes"].mean()),
        "rss_sum": float(ranks["peak_rss_bytes"].sum()),
        "tree": memory, "ranks_rss_pss": ranks_only(memory), "config": attrs["config"],
    }


def _registry_memory(clients: int) -> tuple[int, int]:
    import psutil

    from hpcbench.fl.clock import ClientRegistry
    from hpcbench.fl.config import DatasetConfig
    from hpcbench.fl.data import DigitsDataset

    proc = psutil.Process()
    before = proc.memory_info().rss
    ds = DigitsDataset(DatasetConfig(num_clients=clients, samples_per_client=10), seed=1)
    reg = ClientRegistry(ds.num_clients, ds.client_sizes(), 978, 200, 710, seed=1)
    grown = proc.memory_info().rss - before
    return ds.metadata_nbytes() + reg.nbytes(), grown


class FLScalingJob(Job):
    """``hpcbench fl-bench``: the same federated job at each world size of ``--np``, side by side.

    Writes no results file (each launched job writes its own, in a temporary
    folder, and is summarised here); the table is printed.
    """

    prog = "hpcbench fl-bench"
    description = "Throughput and scaling benchmark of the federated emulation."
    passthrough = True

    def add_arguments(self, parser) -> None:
        parser.add_argument("--np", default="3,64", help="comma-separated world sizes (first is the baseline)")
        parser.add_argument("--rounds", type=int, default=12)
        parser.add_argument("--warmup", type=int, default=2, help="rounds excluded from steady state")
        parser.add_argument("--clients", type=int, default=1000, help="registered clients")
        parser.add_argument("--participants", type=int, default=100)
        parser.add_argument("--registry-clients", type=int, default=1_000_000,
                            help="clients of the in-process registry-memory check (0: skip)")
        parser.add_argument("--flower", default="auto", metavar="PYTHON",
                            help="also run Flower (flwr[simulation]) on the same task with this Python and "
                                 "compare with the first world size; auto: this Python if it can import flwr "
                                 "and ray; none: skip")
        parser.add_argument("--client-training", default="numpy", metavar="ENGINES",
                            help="comma-separated client-training engines (numpy, sequential, batched): the "
                                 "first runs at every --np and is compared with Flower, the others at the first "
                                 "--np only; numpy imports no torch on any rank (mlp/logreg, sync, uncompressed)")
        parser.add_argument("--flower-rounds", type=int, default=5,
                            help="rounds of the Flower run (its first --warmup are not timed)")

    def configure(self, args) -> None:
        try:
            sizes = [int(s) for s in args.np.split(",") if s]
            if not sizes or min(sizes) < 1 or max(sizes) > MAX_NP:
                raise ValueError
        except ValueError:
            raise InputError(f"--np: expected comma-separated integers in 1..{MAX_NP}, got {args.np!r}") from None
        for flag, value, low in (("--warmup", args.warmup, 0), ("--rounds", args.rounds, 1),
                                 ("--clients", args.clients, 1), ("--participants", args.participants, 1),
                                 ("--registry-clients", args.registry_clients, 0),
                                 ("--flower-rounds", args.flower_rounds, 1)):
            if value < low:
                raise InputError(f"{flag}: must be >= {low}, got {value}")
        if args.registry_clients > 100_000_000:
            raise InputError(f"--registry-clients: at most 100000000, got {args.registry_clients}")
        if args.rounds <= args.warmup:
            raise InputError(f"--rounds ({args.rounds}) must exceed --warmup ({args.warmup})")
        args.sizes = sizes
        args.engines = _engines(args.client_training, args.passthrough)
        for engine in args.engines:  # the launched jobs' own checks, here: a bad job flag exits 2 before any launch
            _check_job_flags(_job_flags(args.rounds, args.clients, args.participants, Path("x"), args.passthrough,
                                        engine, "fl-bench"))
        from hpcbench.bench.flower_compare import resolve_python

        args.flower_python = resolve_python(args.flower)
        if args.flower_python and args.flower_rounds <= args.warmup:
            raise InputError(f"--flower-rounds ({args.flower_rounds}) must exceed --warmup ({args.warmup})")
        self.cfg = args

    def run(self, results) -> int:
        args = self.cfg
        if self.comm.rank != 0:        # one launcher: started under mpiexec, the others wait
            return 0
        from hpcbench.bench.flower_compare import flower_settings, run_flower

        rows, flower_flags = [], None
        with tempfile.TemporaryDirectory(prefix="hpcbench-flbench-") as tmp:
            runs = [(n, args.engines[0]) for n in args.sizes] + [(args.sizes[0], e) for e in args.engines[1:]]
            for step, (n, engine) in enumerate(runs, start=1):
                fault_point(step)
                print(f"running -np {n} ({engine}) ...", flush=True)
                rows.append(_measure(*_run(n, args.rounds, args.clients, args.participants, Path(tmp),
                                           args.passthrough, engine), args.warmup))
                if step == 1 and args.flower_python:  # the job's task is known now: can Flower run it?
                    try:
                        flower_flags = flower_settings(rows[0]["config"], args.clients, args.participants)
                    except InputError as exc:
                        if args.flower != "auto":
                            raise
                        print(f"Flower skipped: {exc}", flush=True)
            flower = None
            if flower_flags is not None:
                fault_point(len(runs) + 1)
                print(f"running Flower with {args.flower_python} ...", flush=True)
                flower = run_flower(args.flower_python, flower_flags, args.flower_rounds, args.warmup, Path(tmp))
        base = rows[0]["round_s"]
        print(f"\n{args.clients} registered clients, {args.participants} participants/round, "
              f"{args.rounds} rounds ({args.warmup} warm-up), {os.cpu_count()} cores")
        print(f"{'np':>4} {'engine':>10} {'round(s)':>9} {'ratio':>6} {'clients/s':>10} {'outside':>8} "
              f"{'rss max(MB)':>12} {'rss mean(MB)':>13} {'tree RSS(MB)':>13}")
        for r in rows:
            print(f"{r['np']:>4} {r['engine']:>10} {r['round_s']:>9.3f} {r['round_s'] / base:>6.2f} "
                  f"{r['clients_per_s']:>10.1f} {r['outside']:>8.1%} {r['rss_max'] / 1e6:>12.0f} "
                  f"{r['rss_mean'] / 1e6:>13.0f} {r['tree'].rss_bytes / 1e6:>13.0f}")
        if len(args.sizes) > 1:
            last = rows[len(args.sizes) - 1]
            print(f"steady-state round time at -np {last['np']} / -np {rows[0]['np']}: "
                  f"{last['round_s'] / base:.2f} (target <= 1.3)")
        if flower is not None:
            _print_flower(rows[0], flower, args)
        if args.registry_clients:
            meta, grown = _registry_memory(args.registry_clients)
            print(f"registry of {args.registry_clients:,} clients: {meta / 1e6:.1f} MB of client metadata, "
                  f"resident memory grew {grown / 1e6:.1f} MB")
        return 0


def _engines(value: str, passthrough: list[str]) -> list[str]:
    """The engines of ``--client-training VALUE``, checked against the config's choices.

    Raises
    ------
    InputError
        An unknown or repeated engine, none, or ``--client_training`` among the job flags.
    """
    from typing import get_args

    from hpcbench.fl.config import FLConfig

    choices = get_args(FLConfig.model_fields["client_training"].annotation)
    engines = [e for e in value.split(",") if e]
    bad = [e for e in engines if e not in choices]
    if not engines or bad or len(set(engines)) != len(engines):
        raise InputError(f"--client-training: expected distinct comma-separated engines among "
                         f"{', '.join(choices)}, got {value!r}")
    if any(a == "--client_training" or a.startswith("--client_training=") for a in passthrough):
        raise InputError("--client_training: fl-bench sets each job's engine; use --client-training ENGINES")
    return engines


def _print_flower(ours: dict, flower: dict, args) -> None:
    """The side-by-side table of hpcbench's first world size and Flower, with the ratios."""
    cfg = ours["config"]
    mb = 1e6
    ranks_rss, ranks_pss = ours["ranks_rss_pss"]
    print(f"\nFlower {flower['flwr']} (Ray {flower['ray']}) vs hpcbench -np {ours['np']} ({ours['engine']}), "
          f"same task: "
          f"{args.clients} clients, {args.participants} participants/round, {cfg['local_steps']} local steps, "
          f"batch {cfg['batch_size']}, lr {cfg['learning_rate']}, {cfg['dataset']['samples_per_client']} "
          f"samples/client; steady rounds after {args.warmup} (Flower: "
          + " ".join(f"{w:.2f}" for w in flower["rounds_s"]) + " s)")
    print(f"{'':>16} {'round(s)':>9} {'tree RSS(MB)':>13} {'tree PSS(MB)':>13} {'procs':>6}")
    for name, r, mem in ((f"hpcbench -np {ours['np']}", ours["round_s"], ours["tree"]),
                         ("Flower", flower["round_s"], flower["memory"])):
        print(f"{name:>16} {r:>9.3f} {mem.rss_bytes / mb:>13.0f} {mem.pss_bytes / mb:>13.0f} {mem.processes:>6}")
    print(f"hpcbench ranks only (no mpiexec/hydra): RSS {ranks_rss / mb:.0f} MB, PSS {ranks_pss / mb:.0f} MB; "
          f"ranks' own peak RSS (ru_maxrss) summed: {ours['rss_sum'] / mb:.0f} MB")
    mem = flower["memory"]
    print(f"Flower / hpcbench: round time {flower['round_s'] / ours['round_s']:.1f}x (target >= 15); "
          f"resident memory, RSS sums {mem.rss_bytes / ranks_rss:.2f}x Flower's tree / hpcbench's ranks "
          f"(the target's measure, >= 4), {mem.rss_bytes / ours['tree'].rss_bytes:.2f}x tree / tree; "
          f"PSS sums {mem.pss_bytes / ranks_pss:.2f}x / ranks, {mem.pss_bytes / ours['tree'].pss_bytes:.2f}x "
          f"tree / tree")


def main(argv: list[str] | None = None) -> int:
    """Entry point (``hpcbench fl-bench``): the shared lifecycle with :class:`FLScalingJob`."""
    from hpcbench.runtime.lifecycle import main as run_main

    return run_main(FLScalingJob, argv)


if __name__ == "__main__":
    sys.exit(main())

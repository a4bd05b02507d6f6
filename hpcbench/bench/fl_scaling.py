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

``--client-training`` names the client-training engines (``numpy``,
``sequential``, ``batched``; comma-separated, default ``numpy,sequential``):
all run at the first world size, the first also at the others. ``numpy``
keeps every rank free of torch (about 220 MB of private memory per process)
and trains up to 64 clients at once in stacked matrix products; it trains
``mlp``/``logreg`` in synchronous jobs without compression (a job it does
not support exits 2 naming ``client_training``). ``sequential`` trains one
torch model per client, one after another.

It also builds a 1,000,000-client registry in-process and reports the bytes
of client metadata and the process's resident-memory growth.

With ``--flower PYTHON`` (or ``auto`` when this Python can import Flower) it
runs Flower's simulation on the same task, the same ``--rounds`` with the
same ``--warmup`` rounds left out, alternating with hpcbench's runs at the
first world size (every engine, then Flower, ``--repeats`` times: A, B, A,
B), so that both sides meet the machine's load alike; the load average at
the start and end of every run is printed beside it. One table lists every
run of both sides (steady round time and process-tree memory, RSS and PSS),
then each engine's ratios to the Flower run beside it
(:mod:`hpcbench.bench.flower_compare`; docs/fl.md). ``sequential`` is the
like-for-like engine: one model per client, as Flower's one message per
client; ``numpy`` is the same maths in another execution model.

``--preset flower-digits`` runs the task in the shape of a plain Flower
FedAvg script instead of hpcbench's (MLP 64-128-10, learning rate 0.05, 5
samples per client, the global model evaluated every round on both sides),
so that the comparison can be rerun on the other side's terms; job flags
given after it override it.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

from hpcbench.lifecycle import Job
from hpcbench.runtime.errors import InputError
from hpcbench.runtime.faults import fault_point

__all__ = ["FLScalingJob", "main"]


def _run(np_: int, rounds: int, clients: int, participants: int, outdir: Path, extra: list[str],
         engine: str = "numpy", repeat: int = 1):
    """Run the job under ``mpiexec -n np_`` with client-training ``engine`` (``repeat``: its run number).

    Returns its results file and the peak memory of its process tree.
    """
    from hpcbench.bench.process_memory import TreeSampler
    from hpcbench.runtime.launch import end_process_group, start_mpi

    name = f"fl-bench-np{np_}-{engine}-{repeat}"
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
    from hpcbench.lifecycle import RankParser, UsageError
    from hpcbench.runtime.config import add_config_arguments, config_overrides, load_config

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


#: ``--preset`` name -> job flags giving another side's task shape (before the user's own flags, which win)
PRESETS = {
    # the shape of a plain Flower FedAvg script: an MLP 64-128-10 trained at lr 0.05 on 5 samples per
    # client, the global model evaluated every round (Flower: centralised evaluate_fn)
    "flower-digits": ["--model.hidden", "128", "--learning_rate", "0.05", "--dataset.samples_per_client", "5",
                      "--eval_interval", "1"],
}


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
        parser.add_argument("--rounds", type=int, default=12, help="rounds of every run, Flower's too")
        parser.add_argument("--warmup", type=int, default=2,
                            help="leading rounds excluded from steady state (on both sides)")
        parser.add_argument("--clients", type=int, default=1000, help="registered clients")
        parser.add_argument("--participants", type=int, default=100)
        parser.add_argument("--registry-clients", type=int, default=1_000_000,
                            help="clients of the in-process registry-memory check (0: skip)")
        parser.add_argument("--flower", default="auto", metavar="PYTHON",
                            help="also run Flower (flwr[simulation]) on the same task with this Python and "
                                 "compare with the first world size; auto: this Python if it can import flwr "
                                 "and ray; none: skip")
        parser.add_argument("--repeats", type=int, default=2,
                            help="with Flower: how many times the two sides alternate (hpcbench's engines, "
                                 "then Flower, again), so both meet the same machine load")
        parser.add_argument("--client-training", default="numpy,sequential", metavar="ENGINES",
                            help="comma-separated client-training engines (numpy, sequential, batched): all run "
                                 "at the first --np and are compared with Flower, the first also at the other "
                                 "--np; sequential (one torch model per client, one after another) is the one "
                                 "like Flower's one message per client")
        parser.add_argument("--preset", choices=sorted(PRESETS), default=None,
                            help="flower-digits: the task shape of a plain Flower FedAvg script (MLP 64-128-10, "
                                 "lr 0.05, 5 samples per client, evaluation every round); job flags override it")

    def configure(self, args) -> None:
        try:
            sizes = [int(s) for s in args.np.split(",") if s]
            if not sizes or min(sizes) < 1 or max(sizes) > MAX_NP:
                raise ValueError
        except ValueError:
            raise InputError(f"--np: expected comma-separated integers in 1..{MAX_NP}, got {args.np!r}") from None
        repeated = sorted({n for n in sizes if sizes.count(n) > 1})
        if repeated:
            raise InputError(f"--np {args.np}: world size {repeated[0]} given twice (each size is one run; "
                             f"--repeats repeats them)")
        for flag, value, low in (("--warmup", args.warmup, 0), ("--rounds", args.rounds, 1),
                                 ("--clients", args.clients, 1), ("--participants", args.participants, 1),
                                 ("--registry-clients", args.registry_clients, 0),
                                 ("--repeats", args.repeats, 1)):
            if value < low:
                raise InputError(f"{flag}: must be >= {low}, got {value}")
        if args.registry_clients > 100_000_000:
            raise InputError(f"--registry-clients: at most 100000000, got {args.registry_clients}")
        if args.rounds <= args.warmup:
            raise InputError(f"--rounds ({args.rounds}) must exceed --warmup ({args.warmup})")
        args.sizes = sizes
        args.engines = _engines(args.client_training, args.passthrough)
        args.job_flags = PRESETS.get(args.preset, []) + list(args.passthrough)
        for engine in args.engines:  # the launched jobs' own checks, here: a bad job flag exits 2 before any launch
            _check_job_flags(_job_flags(args.rounds, args.clients, args.participants, Path("x"), args.job_flags,
                                        engine, "fl-bench"))
        from hpcbench.bench.flower_compare import resolve_python

        args.flower_python = resolve_python(args.flower)
        self.cfg = args

    def run(self, results) -> int:
        args = self.cfg
        if self.comm.rank != 0:        # one launcher: started under mpiexec, the others wait
            return 0
        from hpcbench.bench.flower_compare import flower_settings, run_flower

        rows, flower_runs, flower_flags = [], [], None
        step = 0
        with tempfile.TemporaryDirectory(prefix="hpcbench-flbench-") as tmp:
            def measure(n: int, engine: str, repeat: int) -> dict:
                nonlocal step
                step += 1
                fault_point(step)
                print(f"running -np {n} ({engine}) ...", flush=True)
                load0 = os.getloadavg()[0]
                row = _measure(*_run(n, args.rounds, args.clients, args.participants, Path(tmp), args.job_flags,
                                     engine, repeat), args.warmup)
                row.update(repeat=repeat, load=(load0, os.getloadavg()[0]))
                return row

            first = args.sizes[0]
            for repeat in range(1, (args.repeats if args.flower_python else 1) + 1):
                for engine in args.engines:  # side A: every engine at the first world size
                    rows.append(measure(first, engine, repeat))
                    if flower_flags is None and args.flower_python:  # the task is known now: can Flower run it?
                        try:
                            flower_flags = flower_settings(rows[0]["config"], args.clients, args.participants)
                        except InputError as exc:
                            if args.flower != "auto":
                                raise
                            print(f"Flower skipped: {exc}", flush=True)
                            args.flower_python = None
                if flower_flags is not None:  # side B: Flower, on the same task
                    step += 1
                    fault_point(step)
                    print(f"running Flower with {args.flower_python} ...", flush=True)
                    load0 = os.getloadavg()[0]
                    run = run_flower(args.flower_python, flower_flags, args.rounds, args.warmup, Path(tmp))
                    run.update(repeat=repeat, load=(load0, os.getloadavg()[0]))
                    flower_runs.append(run)
            for n in args.sizes[1:]:  # scaling: the first engine at the other world sizes
                rows.append(measure(n, args.engines[0], 1))
        _print_rows(rows, args)
        if flower_runs:
            _print_flower(rows, flower_runs, args)
        if args.registry_clients:
            meta, grown = _registry_memory(args.registry_clients)
            print(f"registry of {args.registry_clients:,} clients: {meta / 1e6:.1f} MB of client metadata, "
                  f"resident memory grew {grown / 1e6:.1f} MB")
        return 0


def _load(pair) -> str:
    """``start-end`` 1-minute load averages of one run."""
    return f"{pair[0]:.1f}-{pair[1]:.1f}"


def _print_rows(rows: list, args) -> None:
    """The table of every hpcbench run: round time, its ratio to the first, overhead share, memory, load."""
    base = rows[0]["round_s"]
    print(f"\n{args.clients} registered clients, {args.participants} participants/round, "
          f"{args.rounds} rounds ({args.warmup} warm-up), {os.cpu_count()} cores"
          + (f", preset {args.preset}" if args.preset else ""))
    print(f"{'np':>4} {'engine':>10} {'round(s)':>9} {'ratio':>6} {'clients/s':>10} {'outside':>8} "
          f"{'rss max(MB)':>12} {'rss mean(MB)':>13} {'tree RSS(MB)':>13} {'load':>9}")
    for r in rows:
        print(f"{r['np']:>4} {r['engine']:>10} {r['round_s']:>9.3f} {r['round_s'] / base:>6.2f} "
              f"{r['clients_per_s']:>10.1f} {r['outside']:>8.1%} {r['rss_max'] / 1e6:>12.0f} "
              f"{r['rss_mean'] / 1e6:>13.0f} {r['tree'].rss_bytes / 1e6:>13.0f} {_load(r['load']):>9}")
    if len(args.sizes) > 1:
        last = rows[-1]
        print(f"steady-state round time at -np {last['np']} / -np {rows[0]['np']}: "
              f"{last['round_s'] / base:.2f} (target <= 1.3)")


def _engines(value: str, passthrough: list[str]) -> list[str]:
    """The engines of ``--client-training VALUE``, checked against the config's choices.

    Raises
    ------
    InputError
        An unknown or repeated engine, none, or ``--client_training`` among the job flags.
    """
    from hpcbench.fl.engines import AUTO, ENGINES

    choices = (AUTO, *ENGINES)
    engines = [e for e in value.split(",") if e]
    bad = [e for e in engines if e not in choices]
    if not engines or bad or len(set(engines)) != len(engines):
        raise InputError(f"--client-training: expected distinct comma-separated engines among "
                         f"{', '.join(choices)}, got {value!r}")
    if any(a == "--client_training" or a.startswith("--client_training=") for a in passthrough):
        raise InputError("--client_training: fl-bench sets each job's engine; use --client-training ENGINES")
    return engines


#: the engine a peer would call like for like with Flower's one message per client, and why
LIKE_FOR_LIKE = ("sequential", "one torch model per client, trained one after another, as Flower trains one "
                               "client per message")
_MODELS = {"numpy": "numpy, no torch: up to 64 clients at once in stacked matrix products (same maths, "
                    "another execution model)",
           "batched": "torch vmap: the clients of one executor at once (another execution model)"}


def _print_flower(rows: list, flower_runs: list, args) -> None:
    """Both sides, run by run in the order they ran, then each engine's ratios to the Flower run beside it."""
    first = [r for r in rows if r["np"] == args.sizes[0] and r["repeat"] <= len(flower_runs)]
    cfg = first[0]["config"]
    mb = 1e6
    fl = flower_runs[0]
    print(f"\nFlower {fl['flwr']} (Ray {fl['ray']}) against hpcbench -np {args.sizes[0]}, same task: "
          f"{args.clients} clients, {args.participants} participants/round, {cfg['local_steps']} local steps, "
          f"batch {cfg['batch_size']}, lr {cfg['learning_rate']}, MLP hidden {cfg['model']['hidden']}, "
          f"{cfg['dataset']['samples_per_client']} samples/client, evaluated every {cfg['eval_interval']} "
          f"rounds; each side {args.rounds} rounds, the median of the {args.rounds - args.warmup} after "
          f"{args.warmup} warm-up; the sides alternate (A, B, A, B)")
    print(f"{'run':>4} {'side':>22} {'round(s)':>9} {'tree RSS(MB)':>13} {'tree PSS(MB)':>13} "
          f"{'ranks RSS(MB)':>14} {'procs':>6} {'load':>9}")
    for repeat, fr in enumerate(flower_runs, start=1):
        for r in (x for x in first if x["repeat"] == repeat):
            print(f"{repeat:>4} {'hpcbench ' + r['engine']:>22} {r['round_s']:>9.3f} "
                  f"{r['tree'].rss_bytes / mb:>13.0f} {r['tree'].pss_bytes / mb:>13.0f} "
                  f"{r['ranks_rss_pss'][0] / mb:>14.0f} {r['tree'].processes:>6} {_load(r['load']):>9}")
        mem = fr["memory"]
        print(f"{repeat:>4} {'Flower':>22} {fr['round_s']:>9.3f} {mem.rss_bytes / mb:>13.0f} "
              f"{mem.pss_bytes / mb:>13.0f} {'':>14} {mem.processes:>6} {_load(fr['load']):>9}"
              f"   rounds " + " ".join(f"{w:.2f}" for w in fr["rounds_s"]))
    print("Flower / hpcbench, per run (the Flower run beside it); memory: peak RSS and PSS summed over each "
          "whole process tree (hpcbench: mpiexec, its proxy and the ranks)")
    for engine in args.engines:
        pairs = [(r, flower_runs[r["repeat"] - 1]) for r in first if r["engine"] == engine]
        time_x = [f["round_s"] / r["round_s"] for r, f in pairs]
        rss_x = [f["memory"].rss_bytes / r["tree"].rss_bytes for r, f in pairs]
        pss_x = [f["memory"].pss_bytes / r["tree"].pss_bytes for r, f in pairs]
        like = engine == LIKE_FOR_LIKE[0]
        what = f"like for like: {LIKE_FOR_LIKE[1]}" if like else _MODELS.get(engine, engine)
        print(f"  {engine} ({what}):")
        print(f"    round time {', '.join(f'{x:.1f}x' for x in time_x)}"
              + (" (target >= 25x)" if like else "")
              + f"; memory RSS {', '.join(f'{x:.2f}x' for x in rss_x)}"
              + (" (target >= 3x)" if like else "")
              + f", PSS {', '.join(f'{x:.2f}x' for x in pss_x)}")


def main(argv: list[str] | None = None) -> int:
    """Entry point (``hpcbench fl-bench``): the shared lifecycle with :class:`FLScalingJob`."""
    from hpcbench.lifecycle import main as run_main

    return run_main(FLScalingJob, argv)


if __name__ == "__main__":
    sys.exit(main())

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

With ``--flower PYTHON`` and ``--pfl PYTHON`` (each ``auto`` when this
Python can import the peer) it runs the peer simulators on the same task:
Flower's simulation (:mod:`hpcbench.bench.flower_compare`) and Apple's pfl
(:mod:`hpcbench.bench.pfl_compare`, once per process count of
``--pfl-procs``: one Python, or ``torchrun`` with N processes). After the
first hpcbench job the task is read back from its results file, checked
(:func:`hpcbench.bench.peers.check_job`) and handed over as a folder of
arrays (:mod:`hpcbench.bench.peer_task`): the same clients, training pool,
test set and initial weights. Every side runs the same ``--rounds`` with the
same ``--warmup`` rounds left out, in rotation at the first world size
(every engine, then Flower, then each pfl setting, ``--repeats`` times), so
that all meet the machine's load alike; the load average at the start and
end of every run is printed beside it. One table lists every run (steady
round time, process-tree memory RSS and PSS, last test accuracy), then each
engine's ratios to each peer (for pfl its fastest setting in that rotation),
with the targets. ``sequential`` is the like-for-like engine: one model per
client, as Flower's one message per client and pfl's one user after another;
``numpy`` and ``batched`` are other execution models.

``--preset`` picks the task: ``digits`` (10,000 clients of 20 digits samples,
1,300 per round, 5 local steps), ``fmnist-cnn`` (Fashion-MNIST split over
1,000 clients with Dirichlet(0.3) label skew, LEAF's CNN, 100 per round, 10
local steps at lr 0.05; engines ``sequential,batched``) or ``flower-digits``
(the shape of a plain Flower FedAvg script: MLP 64-128-10, learning rate
0.05, 5 samples per client, the global model evaluated every round);
``--clients``, ``--participants``, ``--client-training`` and job flags given
with it override it. ``--keep DIR`` keeps every run's files and a
``summary.json`` of the tables.
"""

from __future__ import annotations

import json
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
        "evaluations": [[int(r), float(a), float(l)] for r, a, l in
                        zip(rounds["round"], rounds["test_accuracy"], rounds["test_loss"]) if np.isfinite(a)],
        "results": str(path),
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


#: ``--preset`` name -> the task: ``job`` flags (before the user's own, which win), and defaults of
#: fl-bench's own ``clients``, ``participants`` and ``engines`` (``--client-training``) where given
PRESETS = {
    # the shape of a plain Flower FedAvg script: an MLP 64-128-10 trained at lr 0.05 on 5 samples per
    # client, the global model evaluated every round (Flower: centralised evaluate_fn)
    "flower-digits": {"job": ["--model.hidden", "128", "--learning_rate", "0.05", "--dataset.samples_per_client",
                              "5", "--eval_interval", "1"]},
    # the peers' digits task of issue 37: 10,000 clients of 20 samples, 1,300 per round, 5 local steps
    "digits": {"job": ["--local_steps", "5"], "clients": 10_000, "participants": 1300},
    # jobs/configs/fmnist-cnn.yaml's workload: Fashion-MNIST split disjointly over the clients with
    # Dirichlet(0.3) label skew, LEAF's CNN, 10 local steps of 16 at lr 0.05, 2,000 test images
    "fmnist-cnn": {"job": ["--dataset.name", "fashion_mnist", "--dataset.partition", "dirichlet",
                           "--dataset.alpha", "0.3", "--dataset.samples_per_client", "null",
                           "--dataset.max_test_samples", "2000", "--model.name", "cnn", "--model.hidden_dense",
                           "2048", "--local_steps", "10", "--batch_size", "16", "--learning_rate", "0.05"],
                   "clients": 1000, "participants": 100, "engines": "sequential,batched"},
}
#: fl-bench's own defaults where no preset sets them
_DEFAULTS = {"clients": 1000, "participants": 100, "engines": "numpy,sequential"}


def _preset_value(preset: str | None, key: str, given):
    """``given`` if the flag was given, else the preset's value, else fl-bench's default."""
    if given is not None:
        return given
    return PRESETS.get(preset, {}).get(key, _DEFAULTS[key])


class FLScalingJob(Job):
    """``hpcbench fl-bench``: the same federated job at each world size of ``--np``, side by side.

    Writes no results file of its own: each launched job writes its own, in a
    temporary folder (or ``--keep DIR``), and is summarised here; the tables
    are printed (and, with ``--keep``, written to ``DIR/summary.json``).
    """

    prog = "hpcbench fl-bench"
    description = "Throughput and scaling benchmark of the federated emulation."
    passthrough = True

    def add_arguments(self, parser) -> None:
        parser.add_argument("--np", default="3,64", help="comma-separated world sizes (first is the baseline)")
        parser.add_argument("--rounds", type=int, default=12, help="rounds of every run, the peers' too")
        parser.add_argument("--warmup", type=int, default=2,
                            help="leading rounds excluded from steady state (on every side)")
        parser.add_argument("--clients", type=int, default=None,
                            help="registered clients (default 1000, or the preset's)")
        parser.add_argument("--participants", type=int, default=None,
                            help="clients aggregated per round (default 100, or the preset's)")
        parser.add_argument("--registry-clients", type=int, default=1_000_000,
                            help="clients of the in-process registry-memory check (0: skip)")
        parser.add_argument("--flower", default="auto", metavar="PYTHON",
                            help="also run Flower (flwr[simulation]) on the same task with this Python and "
                                 "compare with the first world size; auto: this Python if it can import flwr "
                                 "and ray; none: skip")
        parser.add_argument("--pfl", default="auto", metavar="PYTHON",
                            help="also run Apple's pfl (pfl-research) on the same task with this Python (one "
                                 "with pfl and torch) and compare with the first world size; auto: this Python "
                                 "if it can import pfl and torch; none: skip")
        parser.add_argument("--pfl-procs", default=str(os.cpu_count() or 1), metavar="N[,N...]",
                            help="pfl's processes, one run per value: 1 runs one Python, more run torchrun "
                                 "--standalone --nproc_per_node N (gloo on the CPU, pfl's distributed "
                                 "simulation); default: one per core")
        parser.add_argument("--repeats", type=int, default=2,
                            help="with peers: how many times the sides rotate (hpcbench's engines, Flower, "
                                 "pfl's settings, again), so all meet the same machine load")
        parser.add_argument("--client-training", default=None, metavar="ENGINES",
                            help="comma-separated client-training engines (numpy, sequential, batched; default "
                                 "numpy,sequential, or the preset's): all run at the first --np and are "
                                 "compared with the peers, the first also at the other --np; sequential (one "
                                 "torch model per client, one after another) is the one like Flower's one "
                                 "message per client")
        parser.add_argument("--preset", choices=sorted(PRESETS), default=None,
                            help="the task: digits (10,000 clients, 1,300 per round, 5 local steps), fmnist-cnn "
                                 "(Fashion-MNIST, LEAF's CNN, 1,000 clients, 100 per round, engines "
                                 "sequential,batched), flower-digits (a plain Flower FedAvg script's shape); "
                                 "--clients, --participants, --client-training and job flags override it")
        parser.add_argument("--keep", default=None, metavar="DIR",
                            help="keep every run's files (the jobs' HDF5 results, the peers' JSON and logs, "
                                 "the task folder) and summary.json in this new folder")

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
        args.clients = _preset_value(args.preset, "clients", args.clients)
        args.participants = _preset_value(args.preset, "participants", args.participants)
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
        if args.keep is not None:
            keep = Path(args.keep)
            if keep.exists() or not keep.parent.is_dir():
                raise InputError(f"--keep: {args.keep!r} must be a new folder in an existing one")
        args.sizes = sizes
        args.engines = _engines(_preset_value(args.preset, "engines", args.client_training), args.passthrough)
        args.job_flags = PRESETS.get(args.preset, {}).get("job", []) + list(args.passthrough)
        for engine in args.engines:  # the launched jobs' own checks, here: a bad job flag exits 2 before any launch
            _check_job_flags(_job_flags(args.rounds, args.clients, args.participants, Path("x"), args.job_flags,
                                        engine, "fl-bench"))
        from hpcbench.bench import flower_compare, pfl_compare

        args.pfl_procs_list = pfl_compare.parse_procs(args.pfl_procs)
        args.flower_python = flower_compare.resolve_python(args.flower)
        args.pfl_python = pfl_compare.resolve_python(args.pfl)
        self.cfg = args

    def run(self, results) -> int:
        args = self.cfg
        if self.comm.rank != 0:        # one launcher: started under mpiexec, the others wait
            return 0
        if args.keep is not None:
            Path(args.keep).mkdir()
            return self._run_in(Path(args.keep))
        with tempfile.TemporaryDirectory(prefix="hpcbench-flbench-") as tmp:
            return self._run_in(Path(tmp))

    def _run_in(self, folder: Path) -> int:
        """Every run, in rotation, with its files in ``folder``; then the tables."""
        from hpcbench.bench.flower_compare import run_flower
        from hpcbench.bench.peers import check_job, write_job_task
        from hpcbench.bench.pfl_compare import run_pfl

        args = self.cfg
        rows, peer_runs = [], []
        task = None
        peers_on = bool(args.flower_python or args.pfl_python)
        step = 0

        def next_step() -> None:
            nonlocal step
            step += 1
            fault_point(step)

        def measure(n: int, engine: str, repeat: int) -> dict:
            next_step()
            print(f"running -np {n} ({engine}) ...", flush=True)
            load0 = os.getloadavg()[0]
            row = _measure(*_run(n, args.rounds, args.clients, args.participants, folder, args.job_flags,
                                 engine, repeat), args.warmup)
            row.update(repeat=repeat, load=(load0, os.getloadavg()[0]))
            return row

        def peer(side: str, repeat: int, start) -> None:
            next_step()
            print(f"running {side} ...", flush=True)
            load0 = os.getloadavg()[0]
            sub = folder / f"{side.replace(' ', '-')}-{repeat}"
            sub.mkdir()
            run = start(sub)
            run.update(side=side, repeat=repeat, load=(load0, os.getloadavg()[0]))
            peer_runs.append(run)

        first = args.sizes[0]
        for repeat in range(1, (args.repeats if peers_on else 1) + 1):
            for engine in args.engines:  # every engine at the first world size
                rows.append(measure(first, engine, repeat))
                if task is None and peers_on:  # the task is known now: can the peers run it?
                    task = self._hand_over(rows[0]["config"], folder / "task", check_job, write_job_task)
                    peers_on = task is not None
            if not peers_on:
                continue
            if args.flower_python:
                peer("Flower", repeat, lambda sub: run_flower(args.flower_python, task, args.rounds, args.warmup,
                                                              sub))
            if args.pfl_python:
                for procs in args.pfl_procs_list:
                    peer(f"pfl {procs} procs", repeat,
                         lambda sub, procs=procs: run_pfl(args.pfl_python, procs, task, args.rounds, args.warmup,
                                                          sub))
        for n in args.sizes[1:]:  # scaling: the first engine at the other world sizes
            rows.append(measure(n, args.engines[0], 1))
        _print_rows(rows, args)
        summary = {"rows": [_row_record(r) for r in rows], "peers": [_peer_record(p) for p in peer_runs]}
        if peer_runs:
            summary["ratios"] = _print_peers(rows, peer_runs, args)
        if args.registry_clients:
            meta, grown = _registry_memory(args.registry_clients)
            print(f"registry of {args.registry_clients:,} clients: {meta / 1e6:.1f} MB of client metadata, "
                  f"resident memory grew {grown / 1e6:.1f} MB")
            summary["registry"] = {"clients": args.registry_clients, "metadata_bytes": meta, "rss_growth_bytes": grown}
        if args.keep is not None:
            summary["settings"] = {k: getattr(args, k) for k in ("sizes", "rounds", "warmup", "clients",
                                                                  "participants", "repeats", "engines", "preset",
                                                                  "job_flags", "pfl_procs_list")}
            summary["cores"] = os.cpu_count()
            (folder / "summary.json").write_text(json.dumps(summary, indent=1))
            print(f"kept: {folder}")
        return 0

    def _hand_over(self, config: dict, folder: Path, check_job, write_job_task):
        """Check that the peers can run the job's task and write its folder; None (with a notice) to skip them.

        With ``--flower auto`` and ``--pfl auto`` a task the peers do not
        reproduce skips them; with a Python named it is an input error.
        """
        args = self.cfg
        named = [f for f, v in (("--flower", args.flower), ("--pfl", args.pfl)) if v not in ("auto", "none")]
        try:
            check_job(config, named[0] if named else "--flower/--pfl")
        except InputError as exc:
            if named:
                raise
            print(f"peers skipped: {exc}", flush=True)
            args.flower_python = args.pfl_python = None
            return None
        write_job_task(config, folder)
        return folder


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
                               "client per message and pfl one user after another")
_MODELS = {"numpy": "numpy, no torch: up to 64 clients at once in stacked matrix products (same maths, "
                    "another execution model)",
           "batched": "torch vmap: the clients of one executor at once (another execution model)"}


#: each peer's targets for the engines, as (engine or "best", round-time ratio, tree-RSS ratio);
#: a ratio is the peer's over hpcbench's (issue 35 for Flower, issue 37 for pfl)
TARGETS = {"Flower": [(LIKE_FOR_LIKE[0], 25.0, 3.0)],
           "pfl": [("best", 3.0, 1.0), (LIKE_FOR_LIKE[0], 1.5, 1.0)]}


def _last_accuracy(evaluations: list) -> str:
    """The last evaluation's test accuracy (and its round), or blank."""
    return f"{evaluations[-1][1]:.3f} (r{evaluations[-1][0]})" if evaluations else ""


def _task_line(cfg: dict, args) -> str:
    """One line describing the task every side runs."""
    model = cfg["model"]
    shape = {"mlp": f"MLP hidden {model['hidden']}", "logreg": "logistic regression",
             "cnn": f"LEAF CNN dense {model['hidden_dense']}"}.get(model["name"], model["name"])
    ds = cfg["dataset"]
    per = (f"{ds['samples_per_client']} samples/client" if ds.get("samples_per_client") is not None
           else f"{ds['partition']} split")
    return (f"{ds['name']}, {args.clients} clients ({per}), {args.participants} participants/round, "
            f"{cfg['local_steps']} local steps, batch {cfg['batch_size']}, lr {cfg['learning_rate']}, {shape}, "
            f"evaluated every {cfg['eval_interval']} rounds")


def _print_peers(rows: list, peer_runs: list, args) -> dict:
    """Every side, run by run in the order they ran, then each engine's ratios to each peer; the ratios.

    Returns
    -------
    dict
        Peer kind (``Flower``, ``pfl``) -> engine -> ``{"time": [...],
        "rss": [...], "pss": [...]}``, one value per repeat (the peer's over
        hpcbench's; for pfl the fastest of its settings in that repeat), and
        ``best`` for the engine fastest in each repeat.
    """
    repeats = max(p["repeat"] for p in peer_runs)
    first = [r for r in rows if r["np"] == args.sizes[0] and r["repeat"] <= repeats]
    mb = 1e6
    versions = []
    for p in peer_runs:
        v = f"Flower {p['flwr']} (Ray {p['ray']})" if "flwr" in p else f"pfl {p['pfl']} (torch {p['torch']})"
        if v not in versions:
            versions.append(v)
    print(f"\n{' and '.join(versions)} against hpcbench -np {args.sizes[0]}, same task: "
          f"{_task_line(first[0]['config'], args)}; each side {args.rounds} rounds, the median of the "
          f"{args.rounds - args.warmup} after {args.warmup} warm-up; the sides rotate (hpcbench's engines, then "
          f"each peer), {repeats} time(s)")
    print(f"{'run':>4} {'side':>22} {'round(s)':>9} {'tree RSS(MB)':>13} {'tree PSS(MB)':>13} "
          f"{'ranks RSS(MB)':>14} {'procs':>6} {'load':>9} {'test acc':>12}")
    for repeat in range(1, repeats + 1):
        for r in (x for x in first if x["repeat"] == repeat):
            print(f"{repeat:>4} {'hpcbench ' + r['engine']:>22} {r['round_s']:>9.3f} "
                  f"{r['tree'].rss_bytes / mb:>13.0f} {r['tree'].pss_bytes / mb:>13.0f} "
                  f"{r['ranks_rss_pss'][0] / mb:>14.0f} {r['tree'].processes:>6} {_load(r['load']):>9} "
                  f"{_last_accuracy(r['evaluations']):>12}")
        for p in (x for x in peer_runs if x["repeat"] == repeat):
            mem = p["memory"]
            print(f"{repeat:>4} {p['side']:>22} {p['round_s']:>9.3f} {mem.rss_bytes / mb:>13.0f} "
                  f"{mem.pss_bytes / mb:>13.0f} {'':>14} {mem.processes:>6} {_load(p['load']):>9} "
                  f"{_last_accuracy(p['evaluations']):>12}   rounds " + " ".join(f"{w:.2f}" for w in p["rounds_s"]))
    print("peer / hpcbench, per run (the peer's run in the same rotation); memory: peak RSS and PSS summed over "
          "each whole process tree (hpcbench: mpiexec, its proxy and the ranks)")
    out = {}
    for kind in ("Flower", "pfl"):
        runs = [p for p in peer_runs if p["side"].split()[0] == kind]
        if not runs:
            continue
        # per repeat, the peer's fastest run (pfl: of its --pfl-procs settings)
        peer_of = {rep: min((p for p in runs if p["repeat"] == rep), key=lambda p: p["round_s"])
                   for rep in sorted({p["repeat"] for p in runs})}
        best_of = {rep: min((r for r in first if r["repeat"] == rep), key=lambda r: r["round_s"]) for rep in peer_of}
        label = kind if kind == "Flower" else "pfl's fastest setting (" + ", ".join(
            f"run {rep}: {p['side']}" for rep, p in peer_of.items()) + ")"
        print(f" against {label}:")
        ratios = out[kind] = {}
        targets = {engine: (t, m) for engine, t, m in TARGETS[kind]}
        for engine in (*args.engines, "best"):
            if engine == "best":
                pairs = [(best_of[rep], peer_of[rep]) for rep in peer_of]
            else:
                pairs = [(r, peer_of[rep]) for rep in peer_of for r in first
                         if r["repeat"] == rep and r["engine"] == engine]
            if not pairs:
                continue
            ratio = {"engine": [r["engine"] for r, _ in pairs],
                     "time": [p["round_s"] / r["round_s"] for r, p in pairs],
                     "rss": [p["memory"].rss_bytes / r["tree"].rss_bytes for r, p in pairs],
                     "pss": [p["memory"].pss_bytes / r["tree"].pss_bytes for r, p in pairs]}
            ratios[engine] = ratio
            t_target, m_target = targets.get(engine, (None, None))
            if engine == "best":
                what = "the fastest engine of each run: " + ", ".join(ratio["engine"])
            elif engine == LIKE_FOR_LIKE[0]:
                what = f"like for like: {LIKE_FOR_LIKE[1]}"
            else:
                what = _MODELS.get(engine, engine)
            print(f"  {engine} ({what}):")
            print(f"    round time {', '.join(f'{x:.2f}x' for x in ratio['time'])}"
                  + (f" (target >= {t_target:g}x)" if t_target else "")
                  + f"; memory RSS {', '.join(f'{x:.2f}x' for x in ratio['rss'])}"
                  + (f" (target >= {m_target:g}x)" if m_target else "")
                  + f", PSS {', '.join(f'{x:.2f}x' for x in ratio['pss'])}")
    return out


def _row_record(r: dict) -> dict:
    """One hpcbench run for ``summary.json`` (bytes, seconds)."""
    keep = ("np", "engine", "repeat", "round_s", "clients_per_s", "outside", "rss_max", "rss_mean", "rss_sum",
            "load", "evaluations", "results")
    return {**{k: r[k] for k in keep}, "tree_rss_bytes": r["tree"].rss_bytes, "tree_pss_bytes": r["tree"].pss_bytes,
            "tree_processes": r["tree"].processes, "ranks_rss_pss_bytes": list(r["ranks_rss_pss"])}


def _peer_record(p: dict) -> dict:
    """One peer run for ``summary.json`` (bytes, seconds)."""
    return {**{k: v for k, v in p.items() if k != "memory"}, "tree_rss_bytes": p["memory"].rss_bytes,
            "tree_pss_bytes": p["memory"].pss_bytes, "tree_processes": p["memory"].processes}


def main(argv: list[str] | None = None) -> int:
    """Entry point (``hpcbench fl-bench``): the shared lifecycle with :class:`FLScalingJob`."""
    from hpcbench.lifecycle import main as run_main

    return run_main(FLScalingJob, argv)


if __name__ == "__main__":
    sys.exit(main())

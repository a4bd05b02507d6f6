"""Flower (with its Ray simulation backend) on the task of ``hpcbench fl-bench``: the baseline side.

Run with a Python that has ``flwr[simulation]`` and torch (a separate
virtualenv; hpcbench itself does not need Flower), on a task folder written
by ``fl-bench`` (:mod:`hpcbench.bench.peer_task`)::

    python -m hpcbench.bench.flower_baseline --task TASK --rounds 6 --json out.json

``hpcbench fl-bench --flower PYTHON`` runs it beside the MPI job and compares.
It imports nothing of hpcbench but the task reader (numpy; torch to build the
model).

The task is hpcbench's, handed over by the folder: the same registered
clients (the same samples of the same training pool), the same model layers
and initial weights, ``local_steps`` steps of plain SGD (no momentum) on
mini-batches of ``batch_size`` from per-client shuffles seeded as hpcbench's
(:func:`hpcbench.bench.peer_task.batch_indices`), and FedAvg weighted by
examples over ``participants`` clients sampled uniformly from ``clients``
per round. The server evaluates the global model on hpcbench's test set
after every ``eval_interval``-th round and the last (Flower's centralised
``evaluate_fn``), as hpcbench's rank 0 does; that round's end is taken
after its evaluation. Federated (client-side) evaluation is off.

It uses Flower's Message API as Flower's own examples do (``ClientApp`` with
``@app.train()``, ``ServerApp`` with ``@app.main()`` driving
``flwr.serverapp.strategy.FedAvg``) under ``flwr.simulation.run_simulation``
with the Ray backend: ``clients`` virtual SuperNodes, one Ray actor per
``cpus_per_client`` of the ``cpus`` given to Ray (default: one per core, as
hpcbench's ``-np 3`` has one executor per core on 2 cores). Each actor uses
one torch thread, as hpcbench's ranks do, and maps the task's arrays
read-only.

Deliberate differences from hpcbench's round: Flower samples participants
with Python's ``random`` and has no virtual clock, overcommitment or
stragglers, so it trains exactly ``participants`` clients per round, as many
as hpcbench aggregates; the client loop is the idiomatic one of Flower's
PyTorch examples (``torch.optim.SGD``, ``state_dict`` in and out), and it
does not compute Oort's utility.

Output (``--json``): versions of Flower, Ray and torch, the settings, and
``round_end_unix_s`` (``time.time()`` when each round's aggregation ended)
with ``start_unix_s`` (when the strategy started), from which the caller
takes round times and the time window of its memory samples.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

__all__ = ["main", "build_apps"]

_CACHE: dict = {}  # per process (a Ray actor): the task and a work model, built once


def _task(path: str):
    """The task folder's arrays and a work model (built once per process)."""
    if path not in _CACHE:
        import torch

        from hpcbench.bench.peer_task import build_model, load_task

        torch.set_num_threads(1)
        task = load_task(path)
        _CACHE[path] = (task, build_model(task.settings["model"], task.initial))
    return _CACHE[path]


def _train(model, x, y, local_steps: int, batch_size: int, lr: float, generator) -> float:
    """``local_steps`` SGD steps on hpcbench's mini-batches, as Flower's PyTorch examples train; mean loss."""
    import torch

    from hpcbench.bench.peer_task import batch_indices

    opt = torch.optim.SGD(model.parameters(), lr=lr)
    model.train()
    x, y = torch.from_numpy(x), torch.from_numpy(y)
    total = 0.0
    for idx in batch_indices(len(y), local_steps, batch_size, generator):
        opt.zero_grad()
        loss = torch.nn.functional.cross_entropy(model(x[idx]), y[idx])
        loss.backward()
        opt.step()
        total += loss.item()
    return total / local_steps


def build_apps(task_path: str, rounds: int, round_ends: list, evaluations: list):
    """Flower's ``(ServerApp, ClientApp)`` for the task folder ``task_path``.

    ``round_ends`` receives ``time.time()`` at the end of each round's
    aggregation (or of its evaluation, in a round that evaluates);
    ``round_ends[0]`` is the strategy's start.

    Parameters
    ----------
    task_path : str
        Task folder (:mod:`hpcbench.bench.peer_task`).
    rounds : int
        Rounds the strategy runs.
    round_ends : list of float
        Appended to while the simulation runs (Unix seconds); pass an empty
        list. After ``rounds`` completed rounds it holds ``rounds + 1`` times.
    evaluations : list
        Receives ``[round, accuracy, loss]`` after each evaluation.

    Returns
    -------
    tuple
        ``(flwr.serverapp.ServerApp, flwr.clientapp.ClientApp)``.

    Raises
    ------
    ImportError
        torch or Flower is not importable.
    """
    from flwr.app import ArrayRecord, ConfigRecord, Context, Message, MetricRecord, RecordDict
    from flwr.clientapp import ClientApp
    from flwr.serverapp import Grid, ServerApp
    from flwr.serverapp.strategy import FedAvg

    from hpcbench.bench.peer_task import client_generator, evaluate

    client_app = ClientApp()

    @client_app.train()
    def train(msg: Message, context: Context) -> Message:
        task, model = _task(task_path)
        s = task.settings
        cid = int(context.node_config["partition-id"])
        model.load_state_dict(msg.content["arrays"].to_torch_state_dict())
        cfg = msg.content["config"]
        x, y = task.client_arrays(cid)
        loss = _train(model, x, y, s["local_steps"], s["batch_size"], s["learning_rate"],
                      client_generator(s["seed"], int(cfg["server-round"]), cid))
        content = RecordDict({"arrays": ArrayRecord(model.state_dict()),
                              "metrics": MetricRecord({"num-examples": len(y), "train_loss": loss})})
        return Message(content=content, reply_to=msg)

    class TimedFedAvg(FedAvg):
        """FedAvg that notes when each round's aggregation ends."""

        def aggregate_train(self, server_round, replies):
            out = super().aggregate_train(server_round, replies)
            round_ends.append(time.time())
            return out

    def evaluate_global(server_round: int, arrays) -> MetricRecord | None:
        """Centralised evaluation on the test set after every ``eval_interval``-th round and the last."""
        task, model = _task(task_path)
        every = task.settings["eval_interval"]
        if not every or server_round == 0 or (server_round % every and server_round != rounds):
            return None
        model.load_state_dict(arrays.to_torch_state_dict())
        accuracy, loss = evaluate(model, *task.test_arrays())
        evaluations.append([server_round, accuracy, loss])
        round_ends[-1] = time.time()  # this round ends after its evaluation, as hpcbench's does
        return MetricRecord({"accuracy": accuracy, "loss": loss})

    server_app = ServerApp()

    @server_app.main()
    def main(grid: Grid, context: Context) -> None:
        task, model = _task(task_path)
        s = task.settings
        strategy = TimedFedAvg(fraction_train=s["participants"] / s["clients"], fraction_evaluate=0.0,
                               min_train_nodes=s["participants"], min_available_nodes=s["clients"])
        round_ends.append(time.time())
        strategy.start(grid=grid, initial_arrays=ArrayRecord(model.state_dict()), num_rounds=rounds,
                       train_config=ConfigRecord({"lr": s["learning_rate"]}), evaluate_fn=evaluate_global)

    return server_app, client_app


def _arguments(argv):
    p = argparse.ArgumentParser(prog="python -m hpcbench.bench.flower_baseline", description=__doc__.split("\n")[0])
    p.add_argument("--task", required=True, help="task folder written by hpcbench fl-bench (peer_task)")
    p.add_argument("--rounds", type=int, default=6)
    p.add_argument("--cpus", type=int, default=os.cpu_count() or 1, help="CPUs given to Ray")
    p.add_argument("--cpus-per-client", type=float, default=1.0, help="Ray num_cpus of each client actor")
    p.add_argument("--json", default=None, help="write the timings and versions here")
    args = p.parse_args(argv)
    for key in ("rounds", "cpus"):
        if getattr(args, key) < 1:
            p.exit(2, f"{p.prog}: --{key}: must be >= 1, got {getattr(args, key)}\n")
    if not 0 < args.cpus_per_client <= args.cpus:
        p.exit(2, f"{p.prog}: --cpus-per-client: must be in (0, --cpus], got {args.cpus_per_client}\n")
    if not os.path.isfile(os.path.join(args.task, "task.json")):
        p.exit(2, f"{p.prog}: --task: {args.task!r} holds no task.json\n")
    return args


def main(argv: list[str] | None = None) -> int:
    """Run the Flower simulation; print (and with ``--json`` write) versions, round end times and evaluations."""
    args = _arguments(argv)
    os.environ.setdefault("FLWR_TELEMETRY_ENABLED", "0")
    try:
        import flwr
        import ray
        from flwr.simulation import run_simulation
    except ImportError as exc:
        print(f"flower_baseline: Flower's simulation extra is not importable ({exc}); "
              f"install it with pip install 'flwr[simulation]'", file=sys.stderr)
        return 2
    import torch

    from hpcbench.bench import flower_baseline  # not __main__: Ray actors import the apps' functions by name

    task_path = os.path.abspath(args.task)
    task, _ = flower_baseline._task(task_path)
    round_ends: list[float] = []
    evaluations: list = []
    server_app, client_app = flower_baseline.build_apps(task_path, args.rounds, round_ends, evaluations)
    run_simulation(server_app=server_app, client_app=client_app, num_supernodes=task.settings["clients"],
                   backend_config={"client_resources": {"num_cpus": args.cpus_per_client, "num_gpus": 0.0},
                                   "init_args": {"num_cpus": args.cpus, "include_dashboard": False}})
    if len(round_ends) != args.rounds + 1:
        # Flower logs a crashed simulation engine (e.g. Ray's node start-up timing out on a loaded
        # machine) and returns while its ServerApp thread still waits for replies: leave without it
        print(f"flower_baseline: {max(0, len(round_ends) - 1)} of {args.rounds} rounds completed", file=sys.stderr,
              flush=True)
        sys.stdout.flush()
        os._exit(1)
    settings = {k: task.settings[k] for k in ("clients", "participants", "local_steps", "batch_size",
                                              "learning_rate", "seed", "eval_interval")}
    out = {"flwr": flwr.__version__, "ray": ray.__version__, "torch": torch.__version__, **settings,
           "rounds": args.rounds, "cpus": args.cpus, "cpus_per_client": args.cpus_per_client,
           "start_unix_s": round_ends[0], "round_end_unix_s": round_ends[1:], "evaluations": evaluations}
    walls = [b - a for a, b in zip(round_ends, round_ends[1:])]
    print(f"Flower {flwr.__version__} (Ray {ray.__version__}): round wall times (s) "
          + " ".join(f"{w:.2f}" for w in walls))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f)
    return 0


if __name__ == "__main__":
    sys.exit(main())

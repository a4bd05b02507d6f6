"""Flower (with its Ray simulation backend) on the task of ``hpcbench fl-bench``: the baseline side.

Run with a Python that has ``flwr[simulation]`` (``pip install 'hpcbench[flower]'``
or a separate virtualenv; hpcbench itself does not need Flower)::

    python -m hpcbench.bench.flower_baseline --clients 10000 --participants 1300 --rounds 6 --json out.json

``hpcbench fl-bench --flower PYTHON`` runs it beside the MPI job and compares.

The task is hpcbench's, built from hpcbench's own code so the data and model
are the same: the digits dataset split by
:class:`hpcbench.fl.data.digits.DigitsDataset` (``samples_per_client`` label-
skewed samples per client, the same seed), the same MLP with the same initial
weights (:func:`hpcbench.fl.models.build_model`), ``local_steps`` steps of
plain SGD (no momentum) on mini-batches of ``batch_size`` from per-client
shuffles, and FedAvg weighted by examples over ``participants`` clients
sampled uniformly from ``clients`` per round. With ``--eval-interval N`` the
server evaluates the global model on hpcbench's test set after every
``N``-th round and the last (Flower's centralised ``evaluate_fn``), as
hpcbench's rank 0 does with ``eval_interval: N``; that round's end is taken
after its evaluation. Federated (client-side) evaluation is off.

It uses Flower's Message API as Flower's own examples do (``ClientApp`` with
``@app.train()``, ``ServerApp`` with ``@app.main()`` driving
``flwr.serverapp.strategy.FedAvg``) under ``flwr.simulation.run_simulation``
with the Ray backend: ``clients`` virtual SuperNodes, one Ray actor per
``cpus_per_client`` of the ``cpus`` given to Ray (default: one per core, as
hpcbench's ``-np 3`` has one executor per core on 2 cores). Each actor uses
one torch thread, as hpcbench's ranks do.

Deliberate differences from hpcbench's round: Flower samples participants
with Python's ``random`` and has no virtual clock, overcommitment or
stragglers, so it trains exactly ``participants`` clients per round, as many
as hpcbench aggregates; the client loop is the idiomatic one of Flower's
PyTorch examples (``torch.optim.SGD``, ``state_dict`` in and out), not
hpcbench's :func:`hpcbench.fl.engines.training.train_client`, and it does not compute
Oort's utility. Its results are not bit-compared with hpcbench's; the
comparison is of round time and memory.

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

_CACHE: dict = {}  # per process (a Ray actor): the dataset and the work model, built once


def _task(settings: dict):
    """The dataset and a work model of hpcbench's task (built once per process)."""
    key = json.dumps(settings, sort_keys=True)
    if key not in _CACHE:
        import torch

        from hpcbench.fl.config import DatasetConfig, ModelConfig
        from hpcbench.fl.data.digits import DigitsDataset
        from hpcbench.fl.models import build_model

        torch.set_num_threads(1)
        ds = DigitsDataset(DatasetConfig(num_clients=settings["clients"],
                                         samples_per_client=settings["samples_per_client"]), settings["seed"])
        model = build_model(ModelConfig(name="mlp", hidden=settings["hidden"]), ds, settings["seed"])
        _CACHE[key] = (ds, model)
    return _CACHE[key]


def _train(model, shard, local_steps: int, batch_size: int, lr: float, generator) -> float:
    """``local_steps`` SGD steps over per-client shuffles, as Flower's PyTorch examples train; mean loss."""
    import torch

    opt = torch.optim.SGD(model.parameters(), lr=lr)
    model.train()
    n = shard.num_examples
    bs = min(batch_size, n)
    perm, pos, total = torch.randperm(n, generator=generator), 0, 0.0
    for _ in range(local_steps):
        if pos + bs > n:
            perm, pos = torch.randperm(n, generator=generator), 0
        x, y = shard.batch(perm[pos:pos + bs])
        pos += bs
        opt.zero_grad()
        loss = model.loss(model(x), y)
        loss.backward()
        opt.step()
        total += loss.item()
    return total / local_steps


def build_apps(settings: dict, round_ends: list):
    """Flower's ``(ServerApp, ClientApp)`` for ``settings`` (the keys of :func:`main`'s arguments).

    ``round_ends`` receives ``time.time()`` at the end of each round's
    aggregation (or of its evaluation, in a round that evaluates);
    ``round_ends[0]`` is the strategy's start.

    Parameters
    ----------
    settings : dict
        ``clients``, ``participants``, ``rounds``, ``local_steps``,
        ``batch_size`` (int), ``learning_rate`` (float),
        ``samples_per_client``, ``hidden``, ``seed``, ``eval_interval``
        (int; 0: no evaluation).
    round_ends : list of float
        Appended to while the simulation runs (Unix seconds); pass an empty
        list. After ``rounds`` completed rounds it holds ``rounds + 1`` times.

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

    from hpcbench.fl.models import flat_parameters
    from hpcbench.fl.engines.training import client_generator, evaluate

    client_app = ClientApp()

    @client_app.train()
    def train(msg: Message, context: Context) -> Message:
        ds, model = _task(settings)
        cid = int(context.node_config["partition-id"])
        model.load_state_dict(msg.content["arrays"].to_torch_state_dict())
        cfg = msg.content["config"]
        shard = ds.shard(cid)
        loss = _train(model, shard, settings["local_steps"], settings["batch_size"], settings["learning_rate"],
                      client_generator(settings["seed"], int(cfg["server-round"]), cid))
        content = RecordDict({"arrays": ArrayRecord(model.state_dict()),
                              "metrics": MetricRecord({"num-examples": shard.num_examples, "train_loss": loss})})
        return Message(content=content, reply_to=msg)

    class TimedFedAvg(FedAvg):
        """FedAvg that notes when each round's aggregation ends."""

        def aggregate_train(self, server_round, replies):
            out = super().aggregate_train(server_round, replies)
            round_ends.append(time.time())
            return out

    def evaluate_global(server_round: int, arrays) -> MetricRecord | None:
        """Centralised evaluation on the test set after every ``eval_interval``-th round and the last."""
        every = settings["eval_interval"]
        if not every or server_round == 0 or (server_round % every and server_round != settings["rounds"]):
            return None
        ds, model = _task(settings)
        model.load_state_dict(arrays.to_torch_state_dict())
        accuracy, loss = evaluate(model, flat_parameters(model), *ds.test_set())
        round_ends[-1] = time.time()  # this round ends after its evaluation, as hpcbench's does
        return MetricRecord({"accuracy": accuracy, "loss": loss})

    server_app = ServerApp()

    @server_app.main()
    def main(grid: Grid, context: Context) -> None:
        _, model = _task(settings)
        strategy = TimedFedAvg(fraction_train=settings["participants"] / settings["clients"],
                               fraction_evaluate=0.0, min_train_nodes=settings["participants"],
                               min_available_nodes=settings["clients"])
        round_ends.append(time.time())
        strategy.start(grid=grid, initial_arrays=ArrayRecord(model.state_dict()), num_rounds=settings["rounds"],
                       train_config=ConfigRecord({"lr": settings["learning_rate"]}), evaluate_fn=evaluate_global)

    return server_app, client_app


def _arguments(argv):
    p = argparse.ArgumentParser(prog="python -m hpcbench.bench.flower_baseline", description=__doc__.split("\n")[0])
    p.add_argument("--clients", type=int, default=10_000, help="registered clients (Flower virtual SuperNodes)")
    p.add_argument("--participants", type=int, default=1300, help="clients trained and aggregated per round")
    p.add_argument("--rounds", type=int, default=6)
    p.add_argument("--local-steps", type=int, default=5)
    p.add_argument("--batch-size", type=int, default=16)
    p.add_argument("--learning-rate", type=float, default=0.1)
    p.add_argument("--samples-per-client", type=int, default=20)
    p.add_argument("--hidden", type=int, default=64, help="hidden units of the MLP")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--eval-interval", type=int, default=0,
                   help="evaluate the global model on the test set every N rounds and after the last (0: never)")
    p.add_argument("--cpus", type=int, default=os.cpu_count() or 1, help="CPUs given to Ray")
    p.add_argument("--cpus-per-client", type=float, default=1.0, help="Ray num_cpus of each client actor")
    p.add_argument("--json", default=None, help="write the timings and versions here")
    args = p.parse_args(argv)
    for key in ("clients", "participants", "rounds", "local_steps", "batch_size", "samples_per_client", "cpus"):
        if getattr(args, key) < 1:
            p.exit(2, f"{p.prog}: --{key.replace('_', '-')}: must be >= 1, got {getattr(args, key)}\n")
    if args.eval_interval < 0:
        p.exit(2, f"{p.prog}: --eval-interval: must be >= 0, got {args.eval_interval}\n")
    if args.participants > args.clients:
        p.exit(2, f"{p.prog}: --participants: {args.participants} exceeds --clients {args.clients}\n")
    if not 0 < args.cpus_per_client <= args.cpus:
        p.exit(2, f"{p.prog}: --cpus-per-client: must be in (0, --cpus], got {args.cpus_per_client}\n")
    return args


def main(argv: list[str] | None = None) -> int:
    """Run the Flower simulation; print (and with ``--json`` write) versions and round end times."""
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

    settings = {k: getattr(args, k) for k in ("clients", "participants", "rounds", "local_steps", "batch_size",
                                              "learning_rate", "samples_per_client", "hidden", "seed",
                                              "eval_interval")}
    from hpcbench.bench import flower_baseline  # not __main__: Ray actors import the apps' functions by name

    round_ends: list[float] = []
    server_app, client_app = flower_baseline.build_apps(settings, round_ends)
    run_simulation(server_app=server_app, client_app=client_app, num_supernodes=args.clients,
                   backend_config={"client_resources": {"num_cpus": args.cpus_per_client, "num_gpus": 0.0},
                                   "init_args": {"num_cpus": args.cpus, "include_dashboard": False}})
    if len(round_ends) != args.rounds + 1:
        # Flower logs a crashed simulation engine (e.g. Ray's node start-up timing out on a loaded
        # machine) and returns while its ServerApp thread still waits for replies: leave without it
        print(f"flower_baseline: {max(0, len(round_ends) - 1)} of {args.rounds} rounds completed", file=sys.stderr,
              flush=True)
        sys.stdout.flush()
        os._exit(1)
    out = {"flwr": flwr.__version__, "ray": ray.__version__, "torch": torch.__version__, **settings,
           "cpus": args.cpus, "cpus_per_client": args.cpus_per_client,
           "start_unix_s": round_ends[0], "round_end_unix_s": round_ends[1:]}
    walls = [b - a for a, b in zip(round_ends, round_ends[1:])]
    print(f"Flower {flwr.__version__} (Ray {ray.__version__}): round wall times (s) "
          + " ".join(f"{w:.2f}" for w in walls))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f)
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Apple's pfl (pfl-research) on the task of ``hpcbench fl-bench``: the pfl baseline side.

Run with a Python that has ``pfl`` and torch (a separate virtualenv; hpcbench
itself does not need pfl), on a task folder written by ``fl-bench``
(:mod:`hpcbench.bench.peer_task`)::

    python -m hpcbench.bench.pfl_baseline --task TASK --rounds 6 --json out.json
    python -m torch.distributed.run --standalone --nnodes 1 --nproc_per_node 2 \\
        -m hpcbench.bench.pfl_baseline --task TASK --rounds 6 --json out.json

``hpcbench fl-bench --pfl PYTHON [--pfl-procs N]`` runs it beside the MPI job
and compares. It imports nothing of hpcbench but the task reader (numpy; torch
to build the model).

The set-up is the one pfl's guides give for fast simulation
(``guides/simulation_distributed`` of pfl-research): in-memory user datasets
(``pfl.data.dataset.Dataset`` built per user by a ``FederatedDataset``'s
``make_dataset_fn``), a ``PyTorchModel`` with ``torch.optim.SGD`` as the
local optimizer and ``torch.optim.SGD(lr=1)`` as the central optimizer,
``FederatedAveraging`` with ``NNAlgorithmParams`` (``train_cohort_size`` =
participants, no validation cohort), a ``SimulatedBackend`` whose only
postprocessor is ``WeightByDatapoints`` (FedAvg weighted by examples, as
hpcbench's), users drawn by ``minimize_reuse`` (pfl's recommended sampler:
each round takes the next participants of a seeded order of the clients, so
none is drawn twice in a round, as in hpcbench), and, under ``torchrun``,
the cohort sharded over the processes (gloo on the CPU) and the central
evaluation sharded by pfl's ``CentralEvaluationCallback``.

What is hpcbench's: the task (clients, pool, partition, test set, initial
weights), the model's layers, and local training: the user dataset yields
``local_steps`` mini-batches of ``min(batch_size, n)`` examples walking
through reshuffled passes with hpcbench's per-client, per-round seeds
(:func:`hpcbench.bench.peer_task.batch_indices`), where pfl's own ``Dataset``
would stop at the end of one pass (``local_num_steps`` "stops before ... if
iterated through dataset"); its length stays the client's ``n``, the FedAvg
weight. The global model is evaluated on the test set after every
``eval_interval``-th round and the last, as hpcbench's rank 0 does.

Deliberate differences: pfl evaluates each trained user's data before and
after training in the central iterations where ``iteration %
evaluation_frequency == 0``; ``evaluation_frequency`` is set to the number of
rounds, so this happens in the first round alone (a warm-up round of
``fl-bench``). pfl has no virtual clock, overcommitment or stragglers: it
trains exactly ``participants`` clients per round, as many as hpcbench
aggregates.

Output (``--json``, written by the first process): versions of pfl and torch,
the settings, the processes and torch threads, ``start_unix_s`` (when training
began, after set-up), ``round_end_unix_s`` (``time.time()`` when each round's
update, and its evaluation if any, was applied) and ``evaluations`` (round,
accuracy, loss).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

__all__ = ["main", "build"]


class _TrainBatch(int):
    """The training batch size handed to pfl: a user dataset sees it and walks hpcbench's mini-batches."""


def build(task, rounds: int, round_ends: list, evaluations: list):
    """pfl's objects for ``task``: ``(algorithm, run keyword arguments)`` for ``FederatedAveraging.run``.

    Parameters
    ----------
    task : hpcbench.bench.peer_task.Task
    rounds : int
        Central iterations.
    round_ends : list
        Receives ``time.time()`` when training begins, then after each round (pass an empty list).
    evaluations : list
        Receives ``(round, accuracy, loss)`` after each evaluation.

    Returns
    -------
    tuple
        ``(pfl.algorithm.FederatedAveraging, dict)``.

    Raises
    ------
    ImportError
        pfl or torch is not importable.
    """
    import numpy as np
    import torch
    from pfl.aggregate.simulate import SimulatedBackend
    from pfl.aggregate.weighting import WeightByDatapoints
    from pfl.algorithm import FederatedAveraging, NNAlgorithmParams
    from pfl.callback.base import TrainingProcessCallback
    from pfl.callback.central_evaluation import CentralEvaluationCallback
    from pfl.data.dataset import Dataset
    from pfl.data.federated_dataset import FederatedDataset
    from pfl.data.sampling import get_user_sampler
    from pfl.hyperparam import NNEvalHyperParams, NNTrainHyperParams
    from pfl.metrics import Metrics, Weighted
    from pfl.model.pytorch import PyTorchModel

    from hpcbench.bench.peer_task import batch_indices, build_model, client_generator

    s = task.settings
    seed, steps, bs = s["seed"], s["local_steps"], s["batch_size"]
    current = {"round": 1}

    class Module(torch.nn.Module):
        """hpcbench's model with the ``loss`` and ``metrics`` pfl's ``PyTorchModel`` calls."""

        def loss(self, x, y):
            return torch.nn.functional.cross_entropy(self(x), y.long())

        @torch.no_grad()
        def metrics(self, x, y, eval=False):  # noqa: A002 (pfl's keyword)
            logits = self(x)
            y = y.long()
            n = len(y)
            return {"loss": Weighted(float(torch.nn.functional.cross_entropy(logits, y, reduction="sum")), n),
                    "accuracy": Weighted(float((logits.argmax(dim=1) == y).sum()), n)}

    class ClientData(Dataset):
        """One user's examples; a training pass walks hpcbench's mini-batches (see the module docstring)."""

        def iter(self, batch_size):  # noqa: A003 (pfl's name)
            if not isinstance(batch_size, _TrainBatch):
                yield from super().iter(batch_size)
                return
            x, y = self.raw_data
            gen = client_generator(seed, current["round"], int(self.user_id))
            for idx in batch_indices(len(y), steps, bs, gen):
                yield x[idx], y[idx]

    def make_dataset_fn(user_id):
        x, y = task.client_arrays(int(user_id))
        return ClientData((torch.from_numpy(x), torch.from_numpy(y)), user_id=user_id)

    order = np.random.RandomState(seed).permutation(task.num_clients).tolist()
    training = FederatedDataset(make_dataset_fn, get_user_sampler("minimize_reuse", order))
    x_test, y_test = task.test_arrays()
    central = Dataset((torch.from_numpy(np.array(x_test)), torch.from_numpy(np.array(y_test))))

    net = build_model(s["model"], task.initial, base=Module)
    model = PyTorchModel(model=net, local_optimizer_create=torch.optim.SGD,
                         central_optimizer=torch.optim.SGD(net.parameters(), lr=1.0))
    every = s["eval_interval"]

    class Evaluation(CentralEvaluationCallback):
        """pfl's sharded central evaluation on hpcbench's schedule: every ``eval_interval``-th round and the last."""

        def on_train_begin(self, *, model):
            return Metrics()

        def after_central_iteration(self, aggregate_metrics, model, *, central_iteration):
            r = central_iteration + 1
            if not every or (r % every and r != rounds):
                return False, Metrics()
            stop, metrics = self._eval(model)
            values = {str(k): v for k, v in metrics.to_simple_dict().items()}
            evaluations.append((r, values["Central val | accuracy"], values["Central val | loss"]))
            return stop, metrics

    class Clock(TrainingProcessCallback):
        """Notes when training begins and when each round ends; advances the round of the shuffles."""

        def on_train_begin(self, *, model):
            round_ends.append(time.time())
            return Metrics()

        def after_central_iteration(self, aggregate_metrics, model, *, central_iteration):
            round_ends.append(time.time())
            current["round"] = central_iteration + 2
            return False, Metrics()

    backend = SimulatedBackend(training_data=training, val_data=None, postprocessors=[WeightByDatapoints()])
    algorithm = FederatedAveraging()
    kwargs = {
        "algorithm_params": NNAlgorithmParams(central_num_iterations=rounds, evaluation_frequency=rounds,
                                              train_cohort_size=s["participants"], val_cohort_size=0),
        "backend": backend, "model": model,
        "model_train_params": NNTrainHyperParams(local_num_epochs=None, local_num_steps=steps,
                                                 local_learning_rate=s["learning_rate"],
                                                 local_batch_size=_TrainBatch(bs)),
        "model_eval_params": NNEvalHyperParams(local_batch_size=512),
        "callbacks": [Evaluation(central, model_eval_params=NNEvalHyperParams(local_batch_size=512)), Clock()],
    }
    return algorithm, kwargs


def _arguments(argv):
    p = argparse.ArgumentParser(prog="python -m hpcbench.bench.pfl_baseline", description=__doc__.split("\n")[0])
    p.add_argument("--task", required=True, help="task folder written by hpcbench fl-bench (peer_task)")
    p.add_argument("--rounds", type=int, default=6)
    p.add_argument("--json", default=None, help="write the timings and versions here (first process)")
    args = p.parse_args(argv)
    if args.rounds < 1:
        p.exit(2, f"{p.prog}: --rounds: must be >= 1, got {args.rounds}\n")
    if not os.path.isfile(os.path.join(args.task, "task.json")):
        p.exit(2, f"{p.prog}: --task: {args.task!r} holds no task.json\n")
    return args


def main(argv: list[str] | None = None) -> int:
    """Run pfl's simulation; print (and with ``--json`` write) versions, round end times and evaluations."""
    args = _arguments(argv)
    try:
        import pfl
        import torch
        from pfl.internal.ops.selector import get_default_framework_module
    except ImportError as exc:
        print(f"pfl_baseline: pfl with torch is not importable ({exc}); install them with "
              f"pip install torch pfl", file=sys.stderr)
        return 2
    import numpy as np

    from hpcbench.bench.peer_task import load_task

    task = load_task(args.task)
    np.random.seed(task.settings["seed"])   # pfl's samplers draw the same sequence in every process
    torch.manual_seed(task.settings["seed"])
    round_ends: list[float] = []
    evaluations: list = []
    algorithm, kwargs = build(task, args.rounds, round_ends, evaluations)
    algorithm.run(**kwargs)
    dist = get_default_framework_module().distributed
    if dist.global_rank != 0:
        return 0
    walls = [b - a for a, b in zip(round_ends, round_ends[1:])]
    out = {"pfl": getattr(pfl, "__version__", None) or _version("pfl"), "torch": torch.__version__,
           "processes": dist.world_size, "torch_threads": torch.get_num_threads(),
           **{k: task.settings[k] for k in ("clients", "participants", "local_steps", "batch_size", "learning_rate",
                                            "seed", "eval_interval")},
           "rounds": args.rounds, "start_unix_s": round_ends[0], "round_end_unix_s": round_ends[1:],
           "evaluations": evaluations}
    print(f"pfl {out['pfl']} ({dist.world_size} process(es)): round wall times (s) "
          + " ".join(f"{w:.2f}" for w in walls), flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f)
    return 0


def _version(name: str) -> str:
    from importlib.metadata import version

    return version(name)


if __name__ == "__main__":
    sys.exit(main())

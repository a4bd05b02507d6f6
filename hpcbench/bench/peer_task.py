"""The task of an ``hpcbench fl-bench`` job handed to the peer simulators (Flower, pfl) as a folder of files.

``hpcbench fl-bench`` reads the task back from the first hpcbench job's
results file (its config), builds the job's dataset and initial model with
hpcbench's own code, and writes them here with :func:`write_task`; the peer
baselines (:mod:`hpcbench.bench.flower_baseline`, :mod:`hpcbench.bench.pfl_baseline`)
run under their own Python environments and read it with :func:`load_task`,
which needs numpy alone at import (torch when a model is built). So every side
trains the same registered clients (the same samples of the same training
pool), from the same initial weights, with the same local steps, batch size,
learning rate and participants per round.

The folder (every array a ``.npy`` file, mapped read-only by the readers, so
the processes of one peer share the pages of the page cache):

=================  ==================================================================
``task.json``      ``format`` (1), the settings (``clients``, ``participants``,
                   ``local_steps``, ``batch_size``, ``learning_rate``, ``seed``,
                   ``eval_interval``), ``dataset`` (its name), ``model`` (``name``:
                   ``mlp``, ``logreg`` or ``cnn``; ``hidden``, ``hidden_dense``,
                   ``input_shape``, ``num_classes``), ``scale`` (the factor applied
                   to uint8 inputs, or null), ``parameters`` (the initial weights'
                   names in ``state_dict`` order)
``x_pool.npy``     the training pool as the dataset stores it: uint8, float32 or
                   int64 of shape ``(n, *input_shape)``
``y_pool.npy``     int64 labels of shape ``(n,)``
``offsets.npy``    int64 ``(clients + 1,)``: client ``c`` holds pool rows
``indices.npy``    ``indices[offsets[c]:offsets[c + 1]]`` (int32 or int64)
``x_test.npy``     float32 test inputs ``(n_test, *input_shape)`` (model inputs)
``y_test.npy``     int64 test labels ``(n_test,)``
``initial.npz``    the initial weights by ``state_dict`` name (float32)
=================  ==================================================================

Local training follows hpcbench's ``sequential`` engine
(:func:`hpcbench.fl.engines.training.train_client`): ``local_steps`` steps
of ``min(batch_size, n)`` examples walking through shuffled passes over the
client's ``n`` examples (reshuffled when a full batch no longer fits), the
shuffles drawn from a torch generator seeded by ``(seed, round, client)``
(:func:`client_generator`, the same seeds as
:func:`hpcbench.fl.engines.training.client_generator`; a test checks they
agree).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np

__all__ = ["Task", "write_task", "load_task", "build_model", "client_generator", "batch_indices", "evaluate",
           "MODEL_NAMES", "FORMAT"]

#: version of the folder's layout
FORMAT = 1
#: the models a peer can build (their layers and ``state_dict`` names are hpcbench's: :func:`build_model`)
MODEL_NAMES = ("mlp", "logreg", "cnn")
_ARRAYS = ("x_pool", "y_pool", "offsets", "indices", "x_test", "y_test")
_SETTINGS = ("clients", "participants", "local_steps", "batch_size", "learning_rate", "seed", "eval_interval")


def write_task(folder: Path, settings: dict, dataset, model) -> None:
    """Write an hpcbench job's task into ``folder`` (created; must not exist).

    Parameters
    ----------
    folder : pathlib.Path
        New folder to create.
    settings : dict
        ``clients``, ``participants``, ``local_steps``, ``batch_size``,
        ``eval_interval``, ``seed`` (int), ``learning_rate`` (float), and
        ``model``: the job's ``model`` section (``name``, ``hidden``,
        ``hidden_dense``), ``dataset``: its ``dataset.name``.
    dataset : hpcbench.fl.data.FederatedDataset
        The job's dataset, built as the job builds it; it must have
        ``training_pool()``, ``offsets``, ``indices`` and ``test_arrays()``
        (digits and the array datasets have).
    model : torch.nn.Module
        The job's initial model (:func:`hpcbench.fl.models.build_model`).

    Raises
    ------
    ValueError
        The model is not one of :data:`MODEL_NAMES`, or the dataset keeps no training pool.
    FileExistsError
        ``folder`` exists.
    """
    spec = dict(settings["model"])
    if spec.get("name") not in MODEL_NAMES:
        raise ValueError(f"model.name {spec.get('name')!r}: the peers build {', '.join(MODEL_NAMES)} only")
    if not hasattr(dataset, "training_pool"):
        raise ValueError(f"dataset {settings['dataset']!r} keeps no training pool the peers can read")
    x_pool, y_pool, scale = dataset.training_pool()
    x_test, y_test = dataset.test_arrays()
    state = {k: v.detach().cpu().numpy().astype(np.float32) for k, v in model.state_dict().items()}
    spec.update(input_shape=[int(d) for d in x_pool.shape[1:]],
                num_classes=int(getattr(dataset, "num_classes")))
    meta = {"format": FORMAT, **{k: settings[k] for k in _SETTINGS}, "dataset": settings["dataset"],
            "model": spec, "scale": scale, "parameters": list(state)}
    folder.mkdir(parents=True)
    for name, arr in zip(_ARRAYS, (x_pool, y_pool, dataset.offsets, dataset.indices, x_test, y_test)):
        np.save(folder / f"{name}.npy", np.ascontiguousarray(arr))
    np.savez(folder / "initial.npz", **state)
    (folder / "task.json").write_text(json.dumps(meta, indent=1))


@dataclass
class Task:
    """A task folder, read: its settings and read-only arrays (see the module docstring).

    Attributes
    ----------
    settings : dict
        ``task.json`` as written.
    arrays : dict of str to ndarray
        ``x_pool``, ``y_pool``, ``offsets``, ``indices``, ``x_test``, ``y_test`` (memory-mapped, read-only).
    initial : dict of str to ndarray
        The initial weights by ``state_dict`` name, float32.
    """

    settings: dict
    arrays: dict
    initial: dict

    @property
    def num_clients(self) -> int:
        """Registered clients."""
        return len(self.arrays["offsets"]) - 1

    def client_size(self, client_id: int) -> int:
        """Local training examples of ``client_id``."""
        off = self.arrays["offsets"]
        return int(off[client_id + 1] - off[client_id])

    def client_arrays(self, client_id: int) -> tuple[np.ndarray, np.ndarray]:
        """Model inputs (float32, scaled as hpcbench scales them) and int64 labels of one client (copies)."""
        off, idx = self.arrays["offsets"], self.arrays["indices"]
        rows = idx[off[client_id]:off[client_id + 1]]
        x = self.arrays["x_pool"][rows]
        scale = self.settings["scale"]
        x = x.astype(np.float32) * np.float32(scale) if scale is not None else np.array(x)
        return x, np.array(self.arrays["y_pool"][rows], dtype=np.int64)

    def test_arrays(self) -> tuple[np.ndarray, np.ndarray]:
        """The test set: float32 inputs and int64 labels (read-only maps)."""
        return self.arrays["x_test"], self.arrays["y_test"]


def load_task(folder: str | Path) -> Task:
    """Read a folder written by :func:`write_task` (arrays mapped read-only).

    Raises
    ------
    ValueError
        Not a task folder of :data:`FORMAT` (names the file or key).
    FileNotFoundError
        A file is missing.
    """
    folder = Path(folder)
    settings = json.loads((folder / "task.json").read_text())
    if settings.get("format") != FORMAT:
        raise ValueError(f"{folder / 'task.json'}: format {settings.get('format')!r}, expected {FORMAT}")
    missing = [k for k in (*_SETTINGS, "model", "scale", "parameters") if k not in settings]
    if missing:
        raise ValueError(f"{folder / 'task.json'}: no {missing[0]!r}")
    arrays = {name: np.load(folder / f"{name}.npy", mmap_mode="r") for name in _ARRAYS}
    with np.load(folder / "initial.npz") as npz:
        initial = {k: np.array(npz[k]) for k in settings["parameters"]}
    return Task(settings, arrays, initial)


def build_model(spec: dict, initial: dict | None = None, base=None):
    """The torch model of ``spec`` (``task.json``'s ``model``), hpcbench's layers under the same names.

    ``mlp``: ``net`` = Linear(F, hidden), ReLU, Linear(hidden, K) (one
    Linear without ``hidden``; ``logreg`` always), as
    :class:`hpcbench.fl.models.mlp.MLP`; ``cnn``: ``features`` = two 5 x 5
    convolutions of 32 and 64 channels with padding 2, each with ReLU and
    2 x 2 max-pooling, ``classifier`` = Flatten, Linear(7 x 7 x 64 at 28 x
    28, ``hidden_dense``), ReLU, Linear(``hidden_dense``, K), as
    :class:`hpcbench.fl.models.cnn.LeafCNN` (LEAF's FEMNIST CNN).

    Parameters
    ----------
    spec : dict
        ``name``, ``hidden``, ``hidden_dense``, ``input_shape``, ``num_classes``.
    initial : dict of str to ndarray, optional
        Weights to load (strictly: every name, every shape).
    base : type, optional
        A ``torch.nn.Module`` subclass to build (a peer adds its own methods,
        e.g. pfl's ``loss`` and ``metrics``); default ``torch.nn.Module``.

    Returns
    -------
    torch.nn.Module
        Input float32 ``(B, *input_shape)``, output logits ``(B, num_classes)``.

    Raises
    ------
    ValueError
        Unknown model name.
    RuntimeError
        ``initial`` does not fit the model (torch's ``load_state_dict``).
    """
    import torch
    from torch import nn

    base = base or nn.Module
    shape, k = tuple(spec["input_shape"]), int(spec["num_classes"])

    class PeerModel(base):
        """hpcbench's model rebuilt from its layers (see :func:`build_model`)."""

        def __init__(self) -> None:
            super().__init__()
            if spec["name"] in ("mlp", "logreg"):
                f, hidden = int(np.prod(shape)), 0 if spec["name"] == "logreg" else int(spec["hidden"])
                self.net = (nn.Sequential(nn.Linear(f, hidden), nn.ReLU(), nn.Linear(hidden, k)) if hidden
                            else nn.Linear(f, k))
                self.stages = ("net",)
            elif spec["name"] == "cnn":
                c, h, w = shape
                self.features = nn.Sequential(
                    nn.Conv2d(c, 32, 5, padding=2), nn.ReLU(), nn.MaxPool2d(2, 2),
                    nn.Conv2d(32, 64, 5, padding=2), nn.ReLU(), nn.MaxPool2d(2, 2))
                dense = int(spec["hidden_dense"])
                self.classifier = nn.Sequential(nn.Flatten(), nn.Linear((h // 4) * (w // 4) * 64, dense), nn.ReLU(),
                                                nn.Linear(dense, k))
                self.stages = ("features", "classifier")
            else:
                raise ValueError(f"model.name {spec['name']!r}: the peers build {', '.join(MODEL_NAMES)} only")

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            for name in self.stages:
                x = getattr(self, name)(x)
            return x

    model = PeerModel()
    if initial is not None:
        model.load_state_dict({k: torch.from_numpy(np.array(v)) for k, v in initial.items()}, strict=True)
    return model


def client_generator(seed: int, round_: int, client_id: int):
    """Per-client, per-round torch generator seeded as hpcbench seeds its client's shuffles.

    Parameters
    ----------
    seed, round_, client_id : int
        The job's seed, the round (1 for the first) and the client.

    Returns
    -------
    torch.Generator
    """
    import torch

    mixed = np.random.SeedSequence([seed, round_, client_id, 0x7A1]).generate_state(1, dtype=np.uint64)[0]
    return torch.Generator().manual_seed(int(mixed) & 0x7FFF_FFFF_FFFF_FFFF)


def batch_indices(n: int, local_steps: int, batch_size: int, generator) -> list:
    """The local examples of each of ``local_steps`` mini-batches, as hpcbench's client draws them.

    Batches of ``min(batch_size, n)`` walk through a shuffle of the ``n``
    examples and a new shuffle starts when a full batch no longer fits.

    Parameters
    ----------
    n : int
        The client's examples (>= 1).
    local_steps, batch_size : int
    generator : torch.Generator
        :func:`client_generator` of the client and round.

    Returns
    -------
    list of torch.Tensor
        ``local_steps`` int64 index tensors of shape ``(min(batch_size, n),)``.
    """
    import torch

    bs = min(batch_size, n)
    perm, pos, out = torch.randperm(n, generator=generator), 0, []
    for _ in range(local_steps):
        if pos + bs > n:
            perm, pos = torch.randperm(n, generator=generator), 0
        out.append(perm[pos:pos + bs])
        pos += bs
    return out


def evaluate(model, x: np.ndarray, y: np.ndarray, batch_size: int = 512) -> tuple[float, float]:
    """Accuracy (fraction in [0, 1]) and mean cross-entropy of ``model`` on ``(x, y)``, as hpcbench evaluates.

    Parameters
    ----------
    model : torch.nn.Module
    x : ndarray of shape (n, *input_shape), float32
    y : ndarray of shape (n,), int64
    batch_size : int, optional

    Returns
    -------
    tuple of float
        ``(accuracy, loss)``; NaN for both on an empty set.
    """
    import torch

    model.eval()
    correct, loss_sum = 0, 0.0
    with torch.no_grad():
        for lo in range(0, len(x), batch_size):
            xb, yb = torch.from_numpy(np.array(x[lo:lo + batch_size])), torch.from_numpy(np.array(y[lo:lo + batch_size]))
            logits = model(xb)
            loss_sum += float(torch.nn.functional.cross_entropy(logits, yb, reduction="sum"))
            correct += int((logits.argmax(dim=1) == yb).sum())
    model.train()
    return (correct / len(x), loss_sum / len(x)) if len(x) else (math.nan, math.nan)

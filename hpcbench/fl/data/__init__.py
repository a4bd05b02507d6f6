"""Real, bundled federated datasets; a registry maps ``dataset.name`` to its class."""

from __future__ import annotations

from hpcbench.datasets.callables import is_callable_name
from hpcbench.fl.data.base import ClientShard, FederatedDataset
from hpcbench.fl.data.callable import CallableDataset
from hpcbench.fl.data.digits import DigitsDataset
from hpcbench.fl.data.fedscale import FedScaleDataset
from hpcbench.fl.data.idx import FashionMnistDataset, IdxDataset
from hpcbench.fl.data.leaf import LeafCeleba, LeafFemnist, LeafSent140, LeafShakespeare
from hpcbench.fl.data.shakespeare import ShakespeareDataset
from hpcbench.runtime.registry import Registry

__all__ = ["DATASETS", "ClientShard", "FederatedDataset", "build_dataset", "dataset_class", "check_dataset_name",
           "load_in_child"]

#: dataset name -> class taking ``(DatasetConfig, seed)``
DATASETS: Registry[type[FederatedDataset]] = Registry("dataset", {
    "digits": DigitsDataset,
    "shakespeare": ShakespeareDataset,
    "fashion_mnist": FashionMnistDataset,
    "idx": IdxDataset,
    "leaf_femnist": LeafFemnist,
    "leaf_shakespeare": LeafShakespeare,
    "leaf_sent140": LeafSent140,
    "leaf_celeba": LeafCeleba,
    "fedscale": FedScaleDataset,
})


def dataset_class(name: str) -> type[FederatedDataset]:
    """The class behind ``dataset.name``: a registered one, or :class:`CallableDataset` for ``module:callable``."""
    return CallableDataset if is_callable_name(name) else DATASETS[name]


def check_dataset_name(name: str) -> str:
    """Config validator of ``dataset.name``: a registered name, or a ``package.module:callable`` that resolves.

    Raises
    ------
    hpcbench.runtime.errors.InputError
        Unknown name, or a callable that cannot be imported or is not callable.
    """
    from hpcbench.datasets.callables import registered_or_callable

    return registered_or_callable(name, DATASETS, "dataset.name")


def build_dataset(cfg, seed: int, comm=None) -> FederatedDataset:
    """Instantiate the dataset named by ``cfg.name`` (a :class:`DatasetConfig`).

    With ``comm`` (collective over it), a dataset class with a
    ``load_arrays(cfg, seed)`` step (the readers of real layouts,
    :class:`hpcbench.fl.data.arrays.ArrayDataset`) runs it on one rank per
    node and shares the arrays with the node's ranks
    (:func:`hpcbench.datasets.nodeshare.node_shared`); a dataset class that has a
    ``load_inputs(cfg, seed)`` step runs it on rank 0 only, in a child
    process (:func:`load_in_child`), and broadcasts the result, so 64 ranks
    do not all import and parse the same files and the aggregator does not
    keep what the step imported; an error there is raised on every rank.

    Raises
    ------
    ValueError, OSError
        The data cannot be loaded or does not fit ``cfg``.
    """
    cls = dataset_class(cfg.name)
    if hasattr(cls, "load_arrays"):   # read once per node, mapped by its ranks
        from hpcbench.datasets.nodeshare import node_shared

        return cls(cfg, seed, arrays=node_shared(comm, lambda: cls.load_arrays(cfg, seed)))
    load = getattr(cls, "load_inputs", None)
    if load is None or comm is None:
        return cls(cfg, seed)
    if comm.size == 1:
        return cls(cfg, seed, inputs=load_in_child(cls, cfg, seed))
    from hpcbench.runtime.wait import Backoff, sleep_bcast

    inputs = error = None
    if comm.rank == 0:
        try:
            inputs = load_in_child(cls, cfg, seed)
        except Exception as exc:  # every rank must leave the broadcast, then raise
            error = exc
    message = f"{type(error).__name__}: {error}" if error is not None else None
    inputs, message = sleep_bcast(comm, (inputs, message), backoff=Backoff(first_s=1e-3, max_s=5e-2))
    if error is not None:
        raise error
    if message is not None:
        raise ValueError(message)
    return cls(cfg, seed, inputs=inputs)


# the child's program: read (sys.path, module, class, cfg, seed) from stdin, write ("ok", inputs) or
# ("error", exception type name, message) to stdout, both pickled
_CHILD = """
import pickle, sys
path, module, name, cfg, seed = pickle.load(sys.stdin.buffer)
sys.path[:0] = path
try:
    import importlib
    out = ("ok", getattr(importlib.import_module(module), name).load_inputs(cfg, seed))
except Exception as exc:
    out = ("error", type(exc).__name__, str(exc))
sys.stdout.buffer.write(pickle.dumps(out, protocol=pickle.HIGHEST_PROTOCOL))
"""


def load_in_child(cls, cfg, seed: int):
    """``cls.load_inputs(cfg, seed)`` run in a child Python process; its result.

    What the step imports then leaves with the child instead of staying
    resident for the whole job: for digits, scikit-learn and SciPy (about
    85 MB of modules, 0.75 s to import) are needed only to read and split
    the images, and a federated job's rank 0 would otherwise hold them next
    to the round's updates. The child imports neither MPI nor torch.

    Parameters
    ----------
    cls : type
        A dataset class with a static ``load_inputs(cfg, seed)`` (importable
        by its module and name).
    cfg : hpcbench.fl.config.DatasetConfig
    seed : int

    Returns
    -------
    object
        What ``load_inputs`` returned (pickled across).

    Raises
    ------
    ValueError, OSError
        ``load_inputs`` raised (the same type for these two, else ValueError,
        with its message), or the child failed to run (OSError with the tail
        of its error output).
    """
    import pickle
    import subprocess
    import sys

    payload = pickle.dumps((list(sys.path), cls.__module__, cls.__qualname__, cfg, seed))
    proc = subprocess.run([sys.executable, "-c", _CHILD], input=payload, capture_output=True)
    try:
        out = pickle.loads(proc.stdout)
    except Exception:
        tail = proc.stderr.decode(errors="replace")[-2000:]
        raise OSError(f"loading dataset {cls.name!r} in a child process failed (exit {proc.returncode}): "
                      f"{tail}") from None
    if out[0] == "ok":
        return out[1]
    raise (OSError if out[1] in ("OSError", "FileNotFoundError", "PermissionError") else ValueError)(out[2])

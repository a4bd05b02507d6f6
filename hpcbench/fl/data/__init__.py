"""Real, bundled federated datasets; a registry maps ``dataset.name`` to its class."""

from __future__ import annotations

from hpcbench.fl.data.base import ClientShard, FederatedDataset
from hpcbench.fl.data.digits import DigitsDataset
from hpcbench.fl.data.shakespeare import ShakespeareDataset
from hpcbench.runtime.registry import Registry

__all__ = ["DATASETS", "ClientShard", "FederatedDataset", "build_dataset"]

#: dataset name -> class taking ``(DatasetConfig, seed)``
DATASETS: Registry[type[FederatedDataset]] = Registry("dataset", {
    "digits": DigitsDataset,
    "shakespeare": ShakespeareDataset,
})


def build_dataset(cfg, seed: int, comm=None) -> FederatedDataset:
    """Instantiate the dataset named by ``cfg.name`` (a :class:`DatasetConfig`).

    With ``comm`` (collective over it), a dataset class that has a
    ``load_inputs(cfg, seed)`` step runs it on rank 0 only and broadcasts the
    result, so 64 ranks do not all import and parse the same files; an error
    there is raised on every rank.

    Raises
    ------
    ValueError, OSError
        The data cannot be loaded or does not fit ``cfg``.
    """
    cls = DATASETS[cfg.name]
    load = getattr(cls, "load_inputs", None)
    if load is None or comm is None or comm.size == 1:
        return cls(cfg, seed)
    from hpcbench.runtime.wait import Backoff, sleep_bcast

    inputs = error = None
    if comm.rank == 0:
        try:
            inputs = load(cfg, seed)
        except Exception as exc:  # every rank must leave the broadcast, then raise
            error = exc
    message = f"{type(error).__name__}: {error}" if error is not None else None
    inputs, message = sleep_bcast(comm, (inputs, message), backoff=Backoff(first_s=1e-3, max_s=5e-2))
    if error is not None:
        raise error
    if message is not None:
        raise ValueError(message)
    return cls(cfg, seed, inputs=inputs)

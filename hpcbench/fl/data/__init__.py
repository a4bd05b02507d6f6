"""Real, bundled federated datasets; a registry maps ``dataset.name`` to its class."""

from __future__ import annotations

from hpcbench.fl.data.base import ClientShard, FederatedDataset
from hpcbench.fl.data.digits import DigitsDataset
from hpcbench.fl.data.shakespeare import ShakespeareDataset

__all__ = ["DATASETS", "ClientShard", "FederatedDataset", "build_dataset"]

#: dataset name -> class taking ``(DatasetConfig, seed)``
DATASETS: dict[str, type[FederatedDataset]] = {
    "digits": DigitsDataset,
    "shakespeare": ShakespeareDataset,
}


def build_dataset(cfg, seed: int) -> FederatedDataset:
    """Instantiate the dataset named by ``cfg.name`` (a :class:`DatasetConfig`)."""
    return DATASETS[cfg.name](cfg, seed)

"""A FedScale image dataset in its own layout (:mod:`hpcbench.datasets.fedscale`): FEMNIST, OpenImage.

``dataset.path`` is FedScale's ``data_dir``; ``dataset.data_map_file`` its
training client map (default ``client_data_mapping/train.csv`` under it),
whose clients are the natural partition; the test set is
``client_data_mapping/test.csv`` beside it. Samples are decoded with PIL,
converted to grey (``dataset.channels: 1``) or RGB (3, FedScale's), and
resized to ``dataset.image_size`` (default 28, FedScale's FEMNIST size).
"""

from __future__ import annotations

from pathlib import Path

from hpcbench.fl.data.arrays import ArrayDataset

__all__ = ["FedScaleDataset"]


class FedScaleDataset(ArrayDataset):
    """See the module docstring."""

    name = "fedscale"
    input_kind = "images"

    @staticmethod
    def map_files(cfg) -> tuple[Path, Path]:
        """The training and test client maps of ``cfg`` (a :class:`hpcbench.fl.config.DatasetConfig`)."""
        root = Path(cfg.path)
        train = Path(cfg.data_map_file) if cfg.data_map_file else root / "client_data_mapping" / "train.csv"
        return train, train.with_name("test.csv")

    @classmethod
    def load_arrays(cls, cfg, seed: int) -> dict:
        """Both client maps and their images (:data:`hpcbench.fl.data.arrays.ARRAY_KEYS`).

        Raises
        ------
        FileNotFoundError, ValueError
            No ``dataset.path``, a missing map or sample, or a map not in FedScale's layout.
        """
        from hpcbench.datasets.fedscale import load_images, read_client_map

        if cfg.path is None:
            raise ValueError("dataset 'fedscale' needs dataset.path, FedScale's data_dir")
        if not Path(cfg.path).is_dir():
            raise FileNotFoundError(f"dataset.path {cfg.path!r}: no such folder (FedScale's data_dir, e.g. from "
                                    f"its benchmark/dataset/download.sh)")
        size, channels = cfg.image_size or 28, cfg.channels or 3
        out = {}
        for split, path in zip(("train", "test"), cls.map_files(cfg)):
            clients, paths, labels = read_client_map(path)
            out[f"x_{split}"] = load_images(cfg.path, split, paths, size, channels)
            out[f"y_{split}"] = labels
            if split == "train":
                out["clients"] = clients
        return out

    def __init__(self, cfg, seed: int, arrays: dict | None = None) -> None:
        super().__init__(cfg, seed, self.load_arrays(cfg, seed) if arrays is None else arrays)

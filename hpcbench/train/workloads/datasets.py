"""The data sets a training job names in ``dataset.name``, by name (light: no torch, read by config validation).

``digits`` and ``shakespeare`` are bundled; ``fashion_mnist`` is read from
``dataset.path`` (default: where ``apt-get install dataset-fashion-mnist``
puts it) and ``idx`` from any folder of IDX files (MNIST, EMNIST, KMNIST)
through core's :mod:`hpcbench.datasets.idx`; ``package.module:callable``
names a user's factory (docs/byo.md). Without a ``dataset`` section a job
trains on its registered model's own data (``ModelSpec.task``).
"""

from __future__ import annotations

from hpcbench.runtime.registry import Registry

__all__ = ["DATASETS"]

#: dataset name -> the kind of its inputs (``images``: float32 ``(C, H, W)``; ``tokens``: int64 windows)
DATASETS: Registry[str] = Registry("dataset", {
    "digits": "images",
    "shakespeare": "tokens",
    "fashion_mnist": "images",
    "idx": "images",
})

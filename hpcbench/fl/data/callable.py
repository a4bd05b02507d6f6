"""A user's dataset: ``dataset.name: package.module:callable`` (the contract is in docs/byo.md)."""

from __future__ import annotations

import numpy as np

from hpcbench.fl.data.arrays import ArrayDataset

__all__ = ["CallableDataset"]


class CallableDataset(ArrayDataset):
    """The arrays a user's factory returns, checked, split like any :class:`ArrayDataset`.

    The factory is called as ``factory(config, seed)`` with ``config`` the
    ``dataset`` section as a dict (its ``options`` mapping for the factory's
    own keys) and ``seed`` the job's seed, once per node; it returns a
    mapping with ``x_train``, ``y_train``, ``x_test``, ``y_test`` and
    optionally ``clients`` (:data:`hpcbench.fl.data.arrays.ARRAY_KEYS`).
    Inputs of shape ``(n, F)`` are feature vectors, ``(n, C, H, W)`` images.
    """

    input_kind = None   # known from the arrays: features or images

    @classmethod
    def load_arrays(cls, cfg, seed: int) -> dict:
        """Call the factory and check what it returned.

        Raises
        ------
        ValueError
            The factory raised, or returned something else than the contract's
            arrays (the message names ``dataset.name``, the callable and what was wrong).
        """
        from hpcbench.datasets.callables import resolve_callable
        from hpcbench.fl.data.arrays import split_arrays

        where = f"dataset.name: {cfg.name!r}"
        factory = resolve_callable(cfg.name, "dataset.name")
        try:
            result = factory(cfg.model_dump(), seed)
        except Exception as exc:
            raise ValueError(f"{where} raised {type(exc).__name__}: {exc}") from None
        if not hasattr(result, "keys"):
            raise ValueError(f"{where} returned a {type(result).__name__}; expected a mapping of x_train, y_train, "
                             f"x_test, y_test[, clients] arrays")
        arrays = {k: np.asarray(v) for k, v in result.items()}
        try:
            split_arrays(arrays, where)
        except ValueError as exc:
            raise ValueError(str(exc)) from None
        if arrays["x_train"].ndim not in (2, 4):
            raise ValueError(f"{where}: x_train has shape {arrays['x_train'].shape}; expected (n, F) features or "
                             f"(n, C, H, W) images")
        if arrays["x_train"].dtype == np.int64:
            raise ValueError(f"{where}: x_train is int64; features and images are float32 or uint8")
        return arrays

    def __init__(self, cfg, seed: int, arrays: dict | None = None) -> None:
        self.name = cfg.name
        super().__init__(cfg, seed, self.load_arrays(cfg, seed) if arrays is None else arrays)
        self.input_kind = "features" if len(self.input_shape) == 1 else "images"


"""A user's dataset: ``dataset.name: package.module:callable`` (the contract is in docs/byo.md)."""

from __future__ import annotations

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
        hpcbench.runtime.errors.InputError
            The factory raised, or returned something else than the contract's
            arrays (:func:`hpcbench.datasets.callables.load_user_arrays`: the message names
            ``dataset.name``, the callable and what was wrong).
        """
        from hpcbench.datasets.callables import load_user_arrays

        return load_user_arrays(cfg.name, "dataset.name", cfg.model_dump(), seed)

    def __init__(self, cfg, seed: int, arrays: dict | None = None) -> None:
        self.name = cfg.name
        super().__init__(cfg, seed, self.load_arrays(cfg, seed) if arrays is None else arrays)
        self.input_kind = "features" if len(self.input_shape) == 1 else "images"


"""LEAF's datasets as LEAF preprocesses them (:mod:`hpcbench.datasets.leaf`), one client per LEAF user.

``dataset.path`` is LEAF's ``data/<dataset>/data`` folder, holding ``train/``
and ``test/``. The training users are the natural clients (``partition:
natural``); the other partitions re-split their pooled samples. The test
set is every user's test samples (at most ``max_test_samples``, a seeded subset).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from hpcbench.fl.data.arrays import ArrayDataset

__all__ = ["LeafFemnist", "LeafShakespeare", "LeafSent140", "LeafCeleba"]


class _Leaf(ArrayDataset):
    """Shared reading: both splits user by user; ``_convert`` turns one user's ``x``, ``y`` into arrays."""

    input_kind = "images"

    @classmethod
    def load_arrays(cls, cfg, seed: int) -> dict:
        """The arrays of :data:`hpcbench.fl.data.arrays.ARRAY_KEYS`, ``clients`` the training users in file order.

        Raises
        ------
        FileNotFoundError, ValueError
            No ``dataset.path``, missing folders, or files not in LEAF's layout
            or with inputs of the wrong shape for the dataset.
        """
        from hpcbench.datasets.leaf import iter_leaf_users

        if cfg.path is None:
            raise ValueError(f"dataset {cls.name!r} needs dataset.path, LEAF's data/<dataset>/data folder "
                             f"(with train/ and test/)")
        state = cls._state(cfg)
        out = {}
        for split in ("train", "test"):
            xs, ys, clients = [], [], []
            for user, x, y in iter_leaf_users(cfg.path, split):
                if not x:
                    continue
                ax, ay = cls._convert(cfg, state, user, x, y)
                xs.append(ax)
                ys.append(ay)
                clients.append(np.full(len(ay), len(clients), dtype=np.int64))
            if not xs:
                raise ValueError(f"{Path(cfg.path) / split}: no user has a sample")
            out[f"x_{split}"], out[f"y_{split}"] = np.concatenate(xs), np.concatenate(ys)
            if split == "train":
                out["clients"] = np.concatenate(clients)
            state = cls._after_train(cfg, state, out)
        return cls._finish(cfg, state, out)

    @classmethod
    def _state(cls, cfg):
        return None

    @classmethod
    def _after_train(cls, cfg, state, out):
        return state

    @classmethod
    def _finish(cls, cfg, state, out) -> dict:
        return out

    def __init__(self, cfg, seed: int, arrays: dict | None = None) -> None:
        super().__init__(cfg, seed, self.load_arrays(cfg, seed) if arrays is None else arrays)


class LeafFemnist(_Leaf):
    """FEMNIST: 28 x 28 grey characters of 3,500 writers, 62 classes; ``x`` 784 floats in [0, 1].

    Stored as uint8 (LEAF's values are ``pixel / 255``, so ``round(255 x)``
    is exact), trained as float32 ``(1, 28, 28)``.
    """

    name = "leaf_femnist"
    min_classes = 62

    @classmethod
    def _convert(cls, cfg, state, user, x, y):
        arr = np.asarray(x, dtype=np.float32)
        if arr.ndim != 2 or arr.shape[1] != 784:
            raise ValueError(f"leaf_femnist: user {user!r}: x has shape {arr.shape}; expected (n, 784) pixels")
        return (np.rint(arr * 255).clip(0, 255).astype(np.uint8).reshape(-1, 1, 28, 28),
                np.asarray(y, dtype=np.int64))


class LeafShakespeare(_Leaf):
    """Shakespeare: ``x`` 80-character strings, ``y`` the next character; one client per role.

    Characters are numbered by LEAF's alphabet
    (:data:`hpcbench.datasets.leaf.SHAKESPEARE_LETTERS`, 80 letters), any
    other character as 80. Inputs are int64 ``(T,)`` windows and targets the
    window shifted by one (``x[1:] + y``), so ``charlstm`` predicts at every
    position, as on the bundled text.
    """

    name = "leaf_shakespeare"
    input_kind = "tokens"
    min_classes = 81

    @classmethod
    def _state(cls, cfg):
        from hpcbench.datasets.leaf import SHAKESPEARE_LETTERS

        lut = np.full(0x110000, len(SHAKESPEARE_LETTERS), dtype=np.int64)
        lut[[ord(c) for c in SHAKESPEARE_LETTERS]] = np.arange(len(SHAKESPEARE_LETTERS))
        return lut

    @classmethod
    def _convert(cls, cfg, lut, user, x, y):
        lengths = {len(s) for s in x}
        if len(lengths) != 1 or not all(isinstance(c, str) and len(c) == 1 for c in y):
            raise ValueError(f"leaf_shakespeare: user {user!r}: x must be strings of one length and y single "
                             f"characters")
        text = "".join(s + c for s, c in zip(x, y))
        codes = lut[np.frombuffer(text.encode("utf-32-le"), dtype=np.uint32)].reshape(len(x), -1)
        return codes[:, :-1].copy(), codes[:, 1:].copy()

    def __init__(self, cfg, seed: int, arrays: dict | None = None) -> None:
        super().__init__(cfg, seed, arrays)
        self.seq_len = self.input_shape[0]


class LeafSent140(_Leaf):
    """Sent140: tweets as bags of words (LEAF's ``bag_log_reg`` baseline), labels 0/1.

    ``x`` is LEAF's record ``[id, date, query, user, text]``; the text is
    split as LEAF does (:func:`hpcbench.datasets.leaf.split_words`) and
    counted over a vocabulary of the ``dataset.vocab_size`` most frequent
    words of the training tweets (LEAF takes GloVe's vocabulary, which is not
    part of its data folder); inputs are float32 counts of shape (vocab_size,).
    """

    name = "leaf_sent140"
    input_kind = "features"
    min_classes = 2

    @classmethod
    def _state(cls, cfg):
        return {"texts": {}, "vocab": None}

    @classmethod
    def _convert(cls, cfg, state, user, x, y):
        from hpcbench.datasets.leaf import split_words

        if not all(isinstance(r, list) and len(r) >= 5 and isinstance(r[4], str) for r in x):
            raise ValueError(f"leaf_sent140: user {user!r}: x must be records [id, date, query, user, text]")
        words = [split_words(r[4]) for r in x]
        if state["vocab"] is None:   # training split: count words now, vectorise after the vocabulary is known
            key = len(state["texts"])
            state["texts"][key] = words
            return np.full((len(x), 1), key, dtype=np.int64), np.asarray(y, dtype=np.int64)
        return cls._bags(words, state["vocab"], cfg.vocab_size), np.asarray(y, dtype=np.int64)

    @staticmethod
    def _bags(words: list[list[str]], vocab: dict, size: int) -> np.ndarray:
        out = np.zeros((len(words), size), dtype=np.float32)
        for i, ws in enumerate(words):
            for w in ws:
                j = vocab.get(w)
                if j is not None:
                    out[i, j] += 1
        return out

    @classmethod
    def _after_train(cls, cfg, state, out):
        if state["vocab"] is not None:
            return state
        from collections import Counter

        counts = Counter(w for ws in state["texts"].values() for t in ws for w in t)
        ranked = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))[:cfg.vocab_size]
        state["vocab"] = {w: i for i, (w, _) in enumerate(ranked)}
        keys = out["x_train"][:, 0]
        out["x_train"] = np.concatenate([cls._bags(state["texts"][int(k)], state["vocab"], cfg.vocab_size)
                                         for k in np.unique(keys)])  # users were appended in key order
        return state


class LeafCeleba(_Leaf):
    """CelebA: one client per celebrity, ``x`` image file names, ``y`` smiling (0/1).

    Images are read from ``dataset.path/raw/img_align_celeba/`` (where LEAF's
    preprocessing leaves them), resized to ``dataset.image_size`` (default 84,
    LEAF's) RGB, stored uint8 ``(3, size, size)``.
    """

    name = "leaf_celeba"
    min_classes = 2

    @classmethod
    def _convert(cls, cfg, state, user, x, y):
        from hpcbench.datasets.fedscale import load_images

        if not all(isinstance(f, str) for f in x):
            raise ValueError(f"leaf_celeba: user {user!r}: x must be image file names")
        images = load_images(Path(cfg.path) / "raw", "img_align_celeba", x, cfg.image_size or 84, 3)
        return images, np.asarray(y, dtype=np.int64)

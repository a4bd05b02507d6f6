"""Small datasets written in the exact layouts of the real ones, for the readers' tests.

- IDX (MNIST's page): big-endian magic ``0x00000803`` for uint8 images of 3
  dimensions, ``0x00000801`` for uint8 labels, then the big-endian uint32
  sizes and the bytes; names ``train-images-idx3-ubyte[.gz]`` etc.;
- LEAF: ``train/`` and ``test/`` folders of ``all_data_K_niid_0_keep_0_{train,test}_9.json``
  files of ``{"users", "num_samples", "user_data": {u: {"x", "y"}}}`` (and
  ``hierarchies`` for Shakespeare, as LEAF writes it), the per-dataset ``x``
  of :mod:`hpcbench.datasets.leaf`;
- FedScale: ``client_data_mapping/{train,test}.csv`` with the header
  ``client_id,sample_path,label_name,label_id`` and PNG samples at
  ``data_dir/sample_path`` (FEMNIST's place).
"""

from __future__ import annotations

import gzip
import json
import struct
from pathlib import Path

import numpy as np


def idx_bytes(array: np.ndarray) -> bytes:
    """An uint8 array as an IDX file's bytes."""
    assert array.dtype == np.uint8
    return struct.pack(">BBBB", 0, 0, 0x08, array.ndim) + struct.pack(f">{array.ndim}I", *array.shape) \
        + array.tobytes()


def write_idx(folder: Path, n_train: int = 120, n_test: int = 40, size: int = 28, classes: int = 10,
              gz: bool = True, prefix: str = "", test_word: str = "t10k", seed: int = 0) -> dict:
    """The four files of one IDX set; returns the arrays written."""
    rng = np.random.default_rng(seed)
    folder.mkdir(parents=True, exist_ok=True)
    out = {}
    for split, n, word in (("train", n_train, "train"), ("test", n_test, test_word)):
        x = rng.integers(0, 256, size=(n, size, size), dtype=np.uint8)
        y = (np.arange(n) % classes).astype(np.uint8)
        rng.shuffle(y)
        for kind, arr, dims in (("images", x, 3), ("labels", y, 1)):
            name = f"{prefix}{word}-{kind}-idx{dims}-ubyte"
            data = idx_bytes(arr)
            if gz:
                (folder / f"{name}.gz").write_bytes(gzip.compress(data))
            else:
                (folder / name).write_bytes(data)
        out[split] = (x, y.astype(np.int64))
    return out


def _leaf_samples(kind: str, n: int, rng, images: Path | None) -> tuple[list, list]:
    if kind == "femnist":
        return ([list(rng.integers(0, 256, 784) / 255) for _ in range(n)],
                [int(v) for v in rng.integers(0, 62, n)])
    if kind == "shakespeare":
        from hpcbench.datasets.leaf import SHAKESPEARE_LETTERS

        text = "".join(rng.choice(list(SHAKESPEARE_LETTERS), size=n + 80))
        return [text[i:i + 80] for i in range(n)], [text[i + 80] for i in range(n)]
    if kind == "sent140":
        words = ["good", "bad", "day", "awful", "great", "!", "the", "rain"]
        return ([[str(rng.integers(10**9)), "Mon Apr 06 22:19:49 PDT 2009", "NO_QUERY", "someone",
                  " ".join(rng.choice(words, size=6))] for _ in range(n)], [int(v) for v in rng.integers(0, 2, n)])
    if kind == "celeba":
        from PIL import Image

        names = []
        for _ in range(n):
            name = f"{rng.integers(10**6):06d}.jpg"
            Image.fromarray(rng.integers(0, 256, (218, 178, 3), dtype=np.uint8)).save(images / name)
            names.append(name)
        return names, [int(v) for v in rng.integers(0, 2, n)]
    raise ValueError(kind)


def write_leaf(folder: Path, kind: str, users: int = 24, files: int = 2, seed: int = 0) -> dict:
    """LEAF's ``train/`` and ``test/`` of ``users`` users (their training sample counts returned, in file order)."""
    rng = np.random.default_rng(seed)
    images = None
    if kind == "celeba":
        images = folder / "raw" / "img_align_celeba"
        images.mkdir(parents=True)
    names = [f"f{1000 + u:04d}_{u % 7:02d}" for u in range(users)]
    counts = {}
    for split in ("train", "test"):
        (folder / split).mkdir(parents=True, exist_ok=True)
        for k, chunk in enumerate(np.array_split(np.arange(users), files)):
            doc = {"users": [], "num_samples": [], "user_data": {}}
            if kind == "shakespeare":
                doc["hierarchies"] = []
            for u in chunk:
                n = int(rng.integers(2, 12)) if split == "train" else int(rng.integers(1, 4))
                x, y = _leaf_samples(kind, n, rng, images)
                doc["users"].append(names[u])
                doc["num_samples"].append(n)
                doc["user_data"][names[u]] = {"x": x, "y": y}
                if kind == "shakespeare":
                    doc["hierarchies"].append("PLAY")
                if split == "train":
                    counts[names[u]] = n
            name = f"all_data_{k}_niid_0_keep_0_{split}_9.json"
            (folder / split / name).write_text(json.dumps(doc))
    return counts


def write_fedscale(folder: Path, clients: int = 12, size: int = 32, classes: int = 5, seed: int = 0) -> dict:
    """FedScale FEMNIST-style folder; returns ``{split: (client_ids, labels)}`` as written, ids by first appearance."""
    from PIL import Image

    rng = np.random.default_rng(seed)
    maps = folder / "client_data_mapping"
    maps.mkdir(parents=True)
    out = {}
    for split in ("train", "test"):
        lines, ids, labels = ["client_id,sample_path,label_name,label_id"], [], []
        for c in rng.permutation(clients):
            for j in range(int(rng.integers(1, 5))):
                label = int(rng.integers(classes))
                rel = f"data/raw_data/by_write/hsf_0/f{c:04d}_{split}/c{label}_{j:05d}.png"
                (folder / rel).parent.mkdir(parents=True, exist_ok=True)
                Image.fromarray(rng.integers(0, 256, (size, size), dtype=np.uint8)).save(folder / rel)
                lines.append(f"f{c:04d}_14,{rel},{label + 30},{label}")
                ids.append(int(c))
                labels.append(label)
        (maps / f"{split}.csv").write_text("\n".join(lines) + "\n")
        first = {}
        out[split] = (np.array([first.setdefault(c, len(first)) for c in ids]), np.array(labels))
    return out

"""LEAF's JSON layout (Caldas et al. 2018, github.com/TalwalkarLab/leaf).

LEAF's preprocessing writes each split as one or more ``.json`` files in a
``train/`` and a ``test/`` folder (``data/<dataset>/data/{train,test}/``),
each holding::

    {"users": [u1, u2, ...], "num_samples": [n1, n2, ...],
     "user_data": {u1: {"x": [...n1 inputs...], "y": [...n1 labels...]}, ...}}

(optionally ``"hierarchies"``). Its models read every file of a folder and
take the training users as the clients (``models/utils/model_utils.py:
read_data``); a user's test samples are held in ``test/`` under the same
name. What ``x`` and ``y`` hold depends on the dataset:

- FEMNIST: ``x`` a list of 784 floats, the 28 x 28 grey image row by row
  scaled to [0, 1] (``data_to_json.py``: ``pixel / 255``); ``y`` the class
  0-61 (digits, upper-case, lower-case letters);
- Shakespeare: ``x`` a string of 80 characters, ``y`` the next character;
  characters index LEAF's 80-letter alphabet (:data:`SHAKESPEARE_LETTERS`);
- Sent140: ``x`` the tweet's record ``[id, date, query, user, text]``, ``y``
  0 or 1 (sentiment);
- CelebA: ``x`` an image file name in ``raw/img_align_celeba/``, ``y`` 0 or 1
  (smiling); LEAF's model resizes images to 84 x 84 RGB.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Iterator

__all__ = ["LeafError", "SHAKESPEARE_LETTERS", "leaf_files", "iter_leaf_users", "split_words"]

#: the alphabet of LEAF's Shakespeare models (``models/utils/language_utils.py``), index = class
SHAKESPEARE_LETTERS = ("\n !\"&'(),-.0123456789:;>?ABCDEFGHIJKLMNOPQRSTUVWXYZ[]abcdefghijklmnopqrstuvwxyz}")

_WORDS = re.compile(r"[\w']+|[.,!?;]")


class LeafError(ValueError):
    """A file does not follow LEAF's JSON layout."""


def split_words(text: str) -> list[str]:
    """Words and punctuation marks of a phrase, as LEAF's Sent140 models split them."""
    return _WORDS.findall(text)


def leaf_files(folder: str | Path, split: str) -> list[Path]:
    """The ``.json`` files of ``folder/split``, sorted by name.

    Raises
    ------
    FileNotFoundError
        ``folder/split`` is not a directory.
    LeafError
        It holds no ``.json`` file.
    """
    where = Path(folder) / split
    if not where.is_dir():
        raise FileNotFoundError(f"LEAF folder {str(where)!r} not found (expected {split}/ with LEAF's .json files "
                                f"under the dataset path)")
    files = sorted(p for p in where.iterdir() if p.suffix == ".json" and p.is_file())
    if not files:
        raise LeafError(f"{where}: no .json file")
    return files


def iter_leaf_users(folder: str | Path, split: str) -> Iterator[tuple[str, list, list]]:
    """Every user of ``folder/split`` with its samples, file by file, in the files' order.

    One file is parsed at a time (a whole FEMNIST split as Python lists would
    take tens of GB).

    Yields
    ------
    user : str
    x : list
        The user's inputs as stored (see the module docstring).
    y : list
        The user's labels, as many as ``x``.

    Raises
    ------
    FileNotFoundError, LeafError
        See :func:`leaf_files`; a file beyond the data bound
        (:class:`hpcbench.runtime.bounded.InputFileError`), a file that is not JSON, lacks ``users``,
        ``num_samples`` or ``user_data``, lists a user without data, or whose
        ``num_samples`` or ``y`` do not match a user's ``x``.
    """
    from hpcbench.runtime.bounded import read_input

    for path in leaf_files(folder, split):
        raw = read_input(path, "dataset.path", "data", "LEAF file", gunzip=False)   # a regular file within the bound
        try:
            data = json.loads(raw.decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as exc:
            raise LeafError(f"{path}: not JSON ({exc})") from None
        missing = [k for k in ("users", "num_samples", "user_data") if not isinstance(data, dict) or k not in data]
        if missing:
            raise LeafError(f"{path}: missing key(s) {', '.join(missing)} of LEAF's layout "
                            f'{{"users", "num_samples", "user_data"}}')
        users, counts, user_data = data["users"], data["num_samples"], data["user_data"]
        if not isinstance(users, list) or not isinstance(counts, list) or len(users) != len(counts):
            raise LeafError(f"{path}: users and num_samples must be lists of the same length")
        for user, n in zip(users, counts):
            entry = user_data.get(user) if isinstance(user_data, dict) else None
            if not isinstance(entry, dict) or "x" not in entry or "y" not in entry:
                raise LeafError(f"{path}: user_data[{user!r}] must be {{\"x\": [...], \"y\": [...]}}")
            x, y = entry["x"], entry["y"]
            if not isinstance(x, list) or not isinstance(y, list) or len(x) != len(y) or len(x) != n:
                raise LeafError(f"{path}: user {user!r} has num_samples {n}, {len(x)} x and {len(y)} y")
            yield str(user), x, y
        del data, user_data

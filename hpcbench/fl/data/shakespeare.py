"""Shakespeare next-character prediction, one client per speaking role (as LEAF)."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np

from hpcbench.fl.data.base import ClientShard, FederatedDataset

__all__ = ["ShakespeareDataset", "split_by_role"]

_SPEAKER = re.compile(r"^([A-Z][A-Za-z' .\-]*[A-Za-z.]):\s*$")


def split_by_role(text: str) -> dict[str, str]:
    """Group the speeches of a play text by speaker.

    A speech starts with a line ``NAME:`` and runs to the next blank line.
    Speeches of one role are joined with newlines, in order of appearance.

    Returns
    -------
    dict of str to str
        Role name to its concatenated speech text (insertion order = first appearance).
    """
    roles: dict[str, list[str]] = {}
    speaker = None
    lines: list[str] = []
    for line in text.splitlines():
        m = _SPEAKER.match(line)
        if m and speaker is None:
            speaker = m.group(1)
            lines = []
        elif not line.strip():
            if speaker is not None and lines:
                roles.setdefault(speaker, []).append("\n".join(lines))
            speaker = None
        elif speaker is not None:
            lines.append(line)
    if speaker is not None and lines:
        roles.setdefault(speaker, []).append("\n".join(lines))
    return {name: "\n".join(speeches) for name, speeches in roles.items()}


class ShakespeareDataset(FederatedDataset):
    """The complete works' dialogue, one federated client per speaking role.

    Each role's text is cut at ``1 - test_fraction`` of its length: the head is
    the client's training text, the tail joins the held-out test text (LEAF's
    per-client split). A training example is a window of ``seq_len``
    characters whose targets are the same window shifted by one (next-character
    prediction at every position). Roles with fewer than ``seq_len + 2``
    training characters are not registered.

    Parameters
    ----------
    cfg : hpcbench.fl.config.DatasetConfig
    seed : int
    path : str or pathlib.Path, optional
        Plain or gzipped text; the bundled tiny-shakespeare copy by default.
    """

    name = "shakespeare"
    input_kind = "tokens"

    def __init__(self, cfg, seed: int, path: str | Path | None = None) -> None:
        if path is None:
            from hpcbench.data import data_path
            path = data_path("shakespeare", "tinyshakespeare.txt.gz")
        from hpcbench.runtime.bounded import read_input

        raw = read_input(path, "dataset", "data", "Shakespeare text")
        text = raw.decode("utf-8")
        self.vocab = sorted(set(text))
        self.num_classes = len(self.vocab)
        lut = np.zeros(max(map(ord, self.vocab)) + 1, dtype=np.int64)
        lut[[ord(c) for c in self.vocab]] = np.arange(len(self.vocab))
        self.seq_len = cfg.seq_len
        roles = split_by_role(text)
        train_parts, test_parts, offsets, names = [], [], [0], []
        for name, speech in roles.items():
            codes = lut[np.frombuffer(speech.encode("utf-32-le"), dtype=np.uint32)]
            cut = int(len(codes) * (1.0 - cfg.test_fraction))
            if cut < cfg.seq_len + 2:
                continue
            train_parts.append(codes[:cut])
            test_parts.append(codes[cut:])
            offsets.append(offsets[-1] + cut)
            names.append(name)
        if not names:
            raise ValueError(f"no role in {str(path)!r} has {cfg.seq_len + 2} training characters")
        import torch  # only the torch engines train character models

        self.roles = names
        self.offsets = np.asarray(offsets, dtype=np.int64)
        self._train = torch.from_numpy(np.concatenate(train_parts))
        test = np.concatenate(test_parts)
        n_windows = max(0, (len(test) - 1) // cfg.seq_len)
        rng = np.random.default_rng([seed, 0x7E57])
        starts = np.sort(rng.choice(n_windows, size=min(n_windows, cfg.max_test_samples), replace=False))
        pos = starts[:, None] * cfg.seq_len + np.arange(cfg.seq_len)[None, :]
        self._x_test = torch.from_numpy(test[pos])
        self._y_test = torch.from_numpy(test[pos + 1])

    @property
    def num_clients(self) -> int:
        return len(self.offsets) - 1

    def client_sizes(self) -> np.ndarray:
        return np.diff(self.offsets) - self.seq_len

    def shard(self, client_id: int) -> ClientShard:
        lo, hi = int(self.offsets[client_id]), int(self.offsets[client_id + 1])
        text = self._train[lo:hi]
        return ClientShard(client_id, hi - lo - self.seq_len, text, text, _window=self.seq_len)

    def test_set(self):
        return self._x_test, self._y_test

    def metadata_nbytes(self) -> int:
        return int(self.offsets.nbytes)

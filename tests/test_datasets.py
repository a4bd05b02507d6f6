"""The shared readers of the bundled data sets (one per data set, used by the FL and training runners alike)."""

from __future__ import annotations

import numpy as np

from hpcbench.datasets.digits import read_digits
from hpcbench.datasets.shakespeare import encode, read_text, vocabulary


def test_digits_reader_gives_scikit_learns_digits_bit_for_bit():
    from sklearn.datasets import load_digits

    x, y = read_digits()
    bunch = load_digits()
    assert x.dtype == np.float32 and x.shape == (1797, 64) and y.dtype == np.int64
    assert np.array_equal(x, (bunch.data / 16.0).astype(np.float32)) and np.array_equal(y, bunch.target)


def test_shakespeare_reader_reads_the_bundled_text_and_its_codes(tmp_path):
    text = read_text()
    vocab = vocabulary(text)
    assert len(text) == 1_115_394 and len(vocab) == 65
    lut = {c: i for i, c in enumerate(vocab)}
    head = text[:5000]
    assert encode(head, vocab).tolist() == [lut[c] for c in head]
    plain = tmp_path / "t.txt"
    plain.write_text("to be", encoding="utf-8")
    assert read_text(plain) == "to be"
    from hpcbench.runtime.bounded import InputFileError

    try:
        read_text(tmp_path / "missing.txt")
    except InputFileError as exc:       # an input error (exit 2) naming the key and the file
        assert "missing.txt" in str(exc) and "dataset.path" in str(exc)
    else:
        raise AssertionError("a missing file was read")

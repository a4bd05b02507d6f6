"""Next-character prediction on the bundled Shakespeare text, for the training runner (real data, accuracy).

The text is the one the federated runner's Shakespeare clients speak
(``hpcbench/data/shakespeare/tinyshakespeare.txt.gz``, Karpathy's tiny
Shakespeare, 1,115,394 characters, 65 distinct). Here it is one data set for
data-parallel SGD, not split by role: the first 90 % is the training text,
the last 10 % the held-out text. A sample is a window of :data:`SEQ_LEN`
characters (LEAF's Shakespeare task: 80) whose targets are the window
shifted by one character; the training windows do not overlap, so an epoch
is 12,548 samples.
"""

from __future__ import annotations

import numpy as np

from hpcbench.datasets import shakespeare

from hpcbench.train.workloads.split import SplitTask

__all__ = ["ShakespeareTask", "SEQ_LEN", "TRAIN_FRACTION", "TEST_WINDOWS", "vocabulary", "read_text"]

#: characters per sample (LEAF: 80)
SEQ_LEN = 80
#: the leading share of the text that is trained on
TRAIN_FRACTION = 0.9
#: held-out windows drawn (seeded) for the accuracy
TEST_WINDOWS = 1000


def read_text() -> str:
    """The bundled Shakespeare text (:func:`hpcbench.datasets.shakespeare.read_text`, decompressed once)."""
    return shakespeare.read_text()


def vocabulary() -> list[str]:
    """The text's distinct characters, sorted (index = class); 65 for the bundled text."""
    return shakespeare.vocabulary(read_text())


class ShakespeareTask(SplitTask):
    """Next-character windows of the Shakespeare text, served as :class:`~hpcbench.train.workloads.split.SplitTask`
    serves a split (one seeded permutation of the training windows per epoch, every worker its slice of the step).

    Inputs int64 ``(B, SEQ_LEN)`` character indices, targets int64 ``(B, SEQ_LEN)`` (the next character at every
    position); accuracy is the share of held-out characters whose next character the model predicts (top-1,
    over :data:`TEST_WINDOWS` seeded windows of the held-out text). The model must return logits of shape
    ``(B, classes, SEQ_LEN)`` (``torch.nn.functional.cross_entropy``'s layout for sequences).
    """

    #: the bundled text's distinct characters (``len(vocabulary())``, checked by the tests)
    classes = 65

    @staticmethod
    def load(seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """``(x_train, y_train, x_test, y_test)`` windows of the text (module docstring); the test windows are a
        seeded draw of :data:`TEST_WINDOWS` non-overlapping windows of the held-out tail."""
        text = read_text()
        codes = shakespeare.encode(text, vocabulary())
        cut = int(len(codes) * TRAIN_FRACTION)
        x_train, y_train = _windows(codes[:cut])
        x_test, y_test = _windows(codes[cut:])
        pick = np.sort(np.random.default_rng([seed, 0x7E57]).choice(len(x_test), size=min(TEST_WINDOWS,
                                                                                           len(x_test)),
                                                                    replace=False))
        return x_train, y_train, x_test[pick], y_test[pick]


def _windows(codes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Non-overlapping windows of ``SEQ_LEN`` and their targets shifted by one, each ``(n, SEQ_LEN)`` int64."""
    n = (len(codes) - 1) // SEQ_LEN
    pos = np.arange(n)[:, None] * SEQ_LEN + np.arange(SEQ_LEN)[None, :]
    return codes[pos], codes[pos + 1]

"""The Shakespeare next-character task of the training runner and its LSTM (real data, held-out accuracy)."""

from __future__ import annotations

import numpy as np
import torch

from hpcbench.train.workloads.models import MODELS, build_model
from hpcbench.train.workloads.text import SEQ_LEN, TEST_WINDOWS, ShakespeareTask, read_text, vocabulary


def test_windows_stream_and_model_agree_with_the_registry():
    task = ShakespeareTask(0, 1, 2)
    assert len(vocabulary()) == ShakespeareTask.classes == 65
    assert task.num_samples == MODELS["shakespeare_lstm"].train_samples == (int(0.9 * len(read_text())) - 1) // SEQ_LEN
    assert MODELS["shakespeare_lstm"].task == "shakespeare"
    x, y = task.take(0, (3, 5))                     # worker 1's 5 windows of the first step
    assert x.shape == y.shape == (5, SEQ_LEN) and x.dtype == torch.int64
    np.testing.assert_array_equal(x[:, 1:].numpy(), y[:, :-1].numpy())        # targets: the next character
    text = "".join(vocabulary()[i] for i in x[0].tolist()) + vocabulary()[int(y[0, -1])]
    assert text in read_text()
    assert len(task.y_test) == TEST_WINDOWS
    model = build_model("shakespeare_lstm", 0)
    assert model(x).shape == (5, 65, SEQ_LEN)       # cross_entropy's layout for sequences
    assert 0.0 <= task.accuracy(model) <= 1.0

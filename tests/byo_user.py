"""A user's model and dataset factories, named ``byo_user:...`` by tests/test_fl_byo.py (the contract: docs/byo.md)."""

from __future__ import annotations

import numpy as np


def blobs(config, seed):
    """Four Gaussian blobs in 6 features, 240 + 60 samples, each training sample's client given (natural)."""
    rng = np.random.default_rng(seed + int(config["options"].get("shift", 0)))
    centres = rng.normal(0, 3, size=(4, 6))

    def draw(n):
        y = np.arange(n, dtype=np.int64) % 4
        return (centres[y] + rng.normal(0, 1, size=(n, 6))).astype(np.float32), y

    x_train, y_train = draw(240)
    x_test, y_test = draw(60)
    return {"x_train": x_train, "y_train": y_train, "x_test": x_test, "y_test": y_test,
            "clients": np.arange(240, dtype=np.int64) % 20}


def small_net(config, seed, num_classes):
    """A 6 -> hidden -> num_classes perceptron (``options.hidden``)."""
    import torch

    hidden = int(config["options"].get("hidden", 16))
    return torch.nn.Sequential(torch.nn.Linear(6, hidden), torch.nn.ReLU(), torch.nn.Linear(hidden, num_classes))


def wrong_output(config, seed, num_classes):
    """Logits of the wrong width (num_classes + 1)."""
    import torch

    return torch.nn.Linear(6, num_classes + 1)


def not_a_module(config, seed, num_classes):
    return "a string"


def wrong_dtype(config, seed):
    """Labels as float64 instead of int64."""
    out = blobs(config, seed)
    out["y_train"] = out["y_train"].astype(np.float64)
    return out


NOT_CALLABLE = 3

"""A user's model and dataset factories for ``hpcbench train``, named ``byo_user_train:...`` by
tests/test_train_byo.py and scripts/hostile_inputs.py (the contract: docs/byo.md)."""

from __future__ import annotations

import numpy as np


def stripes(config, seed):
    """Grey 1 x 10 x 10 uint8 images of three classes (a bright row, column or diagonal, plus noise): 600 + 150."""
    rng = np.random.default_rng(seed + int(config["options"].get("shift", 0)))

    def draw(n):
        y = np.arange(n, dtype=np.int64) % 3
        x = rng.integers(0, 60, size=(n, 1, 10, 10))
        at = rng.integers(1, 9, size=n)
        for i in range(n):
            if y[i] == 0:
                x[i, 0, at[i], :] += 180
            elif y[i] == 1:
                x[i, 0, :, at[i]] += 180
            else:
                x[i, 0, np.arange(10), np.arange(10)] += 180
        return x.astype(np.uint8), y

    x_train, y_train = draw(600)
    x_test, y_test = draw(150)
    return {"x_train": x_train, "y_train": y_train, "x_test": x_test, "y_test": y_test}


def small_cnn(config, seed, num_classes):
    """One 3 x 3 convolution of ``options.channels`` (default 4) channels, 2 x 2 pooling, a linear layer."""
    import torch

    c = int(config["options"].get("channels", 4))
    return torch.nn.Sequential(torch.nn.Conv2d(1, c, 3, padding=1), torch.nn.ReLU(), torch.nn.MaxPool2d(2),
                               torch.nn.Flatten(), torch.nn.Linear(c * 25, num_classes))


def wrong_output(config, seed, num_classes):
    """Logits of the wrong width (num_classes + 1)."""
    import torch

    return torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(100, num_classes + 1))


def not_a_module(config, seed, num_classes):
    return "a string"


def raises(config, seed, num_classes):
    raise RuntimeError("out of ideas")


def flat_images(config, seed):
    """Images without their channel axis: (n, 10, 10), which the contract refuses."""
    out = stripes(config, seed)
    out["x_train"] = out["x_train"][:, 0]
    return out


def float_labels(config, seed):
    """Labels as float64 instead of int64."""
    out = stripes(config, seed)
    out["y_train"] = out["y_train"].astype(np.float64)
    return out


def a_list(config, seed):
    return [1, 2, 3]


NOT_CALLABLE = 3

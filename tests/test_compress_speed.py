"""Threshold-v against torch.topk: recall after warm start (speed is measured by the bench)."""

import numpy as np
import torch

from hpcbench.compress import create


def test_thresholdv_recall_on_drifting_gradients():
    g = torch.Generator().manual_seed(0)
    n, ratio = 200_000, 0.01
    k = int(n * ratio)
    c = create("thresholdv", ratio=ratio)
    base = torch.randn(n, generator=g)
    recalls = []
    for step in range(12):
        x = base * (1 + 0.05 * step) + 0.3 * torch.randn(n, generator=g)
        (idx, _), _ = c.compress(x, "g")
        ref = torch.topk(x.abs(), k).indices
        recalls.append(np.intersect1d(idx.numpy(), ref.numpy()).size / k)
    assert min(recalls[1:]) >= 0.9, recalls

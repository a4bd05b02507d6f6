"""Synthetic gradients with a known noise scale, shared by the monitor tests.

Per-sample gradients are ``g = G + xi`` with ``xi ~ N(0, sigma^2 I_D)``, so
``tr(Sigma) = D sigma^2`` and ``B_simple = D sigma^2 / |G|^2``. The mean of a
batch of ``b`` samples is drawn directly as ``G + N(0, sigma^2 / b I_D)`` (the
same distribution).
"""

from __future__ import annotations

import numpy as np

#: dimension, |G|^2, target B_simple, per-worker batch
DIM, G_SQ, B_SIMPLE, LOCAL_BATCH = 50_000, 1.0, 64.0, 8


def true_gradient(seed: int = 20181206) -> np.ndarray:
    """``G``, float64 of shape (DIM,), with ``|G|^2 = G_SQ``."""
    g = np.random.default_rng(seed).standard_normal(DIM)
    return g * np.sqrt(G_SQ) / np.linalg.norm(g)


def worker_gradients(rng: np.random.Generator, g: np.ndarray, nworkers: int) -> np.ndarray:
    """One step's batch-mean gradients of ``nworkers`` workers, shape (nworkers, DIM), float64."""
    sigma2 = B_SIMPLE * G_SQ / DIM
    noise = rng.standard_normal((nworkers, DIM)) * np.sqrt(sigma2 / LOCAL_BATCH)
    return g[None, :] + noise

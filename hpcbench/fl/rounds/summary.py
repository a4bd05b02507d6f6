"""A federated run's end-of-run figures (rank 0)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

__all__ = ["Summary"]


@dataclass
class Summary:
    """End-of-run figures (rank 0); ``rounds`` counts rounds or server updates."""

    rounds: int = 0
    final_accuracy: float = math.nan
    time_to_accuracy_s: float = math.nan
    rounds_to_accuracy: int = -1
    wall_s: float = 0.0
    clients_trained: int = 0
    final_parameters: np.ndarray = field(default_factory=lambda: np.zeros(0, np.float32))

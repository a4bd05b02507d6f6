"""Pipeline schedules: the order of forward (``F``) and backward (``B``) micro-batch actions per stage.

A schedule only orders actions (as ``torch.distributed.pipelining``'s
``ScheduleGPipe`` / ``Schedule1F1B`` do); the runner executes the list and
:func:`hpcbench.allocation.simulate.simulate` predicts its timing.

* ``gpipe`` (Huang et al., 2019): every stage runs all ``m`` forwards, then
  all ``m`` backwards. Bubble fraction ``(p - 1) / (m + p - 1)`` for ``p``
  balanced stages.
* ``1f1b`` (PipeDream-Flush, Narayanan et al., 2021): stage ``k`` runs
  ``min(p - k - 1, m)`` warm-up forwards, then alternates one forward and one
  backward, then drains the remaining backwards. Same bubble as GPipe, but
  at most ``p - k`` micro-batches' activations are held at once.
"""

from __future__ import annotations

from typing import Callable

from hpcbench.runtime.registry import Registry

__all__ = ["SCHEDULES", "gpipe", "one_f_one_b", "Action"]

#: ``("F" or "B", micro-batch index)``
Action = tuple[str, int]


def gpipe(stage: int, num_stages: int, micro_batches: int) -> list[Action]:
    """GPipe's actions for ``stage``: ``F0 .. F(m-1), B0 .. B(m-1)``."""
    return [("F", i) for i in range(micro_batches)] + [("B", i) for i in range(micro_batches)]


def one_f_one_b(stage: int, num_stages: int, micro_batches: int) -> list[Action]:
    """1F1B's actions for ``stage``: warm-up forwards, alternating F/B, then the remaining backwards."""
    warmup = min(num_stages - stage - 1, micro_batches)
    actions: list[Action] = [("F", i) for i in range(warmup)]
    for i in range(micro_batches - warmup):
        actions += [("F", warmup + i), ("B", i)]
    actions += [("B", i) for i in range(micro_batches - warmup, micro_batches)]
    return actions


#: name -> ``schedule(stage, num_stages, micro_batches) -> list of actions``
SCHEDULES: Registry[Callable[[int, int, int], list[Action]]] = Registry("pipeline schedule", {
    "gpipe": gpipe,
    "1f1b": one_f_one_b,
})

"""A training rank's peak memory, estimated from the config before anything is built.

The model is built on torch's ``meta`` device (shapes only, no memory) and run
forward once on a meta batch of the configured shape; the outputs of its
leaf modules are the activations autograd keeps for the backward pass. A rank
that trains holds the input batch, those activations, and the parameters
four times over (weights, gradients, SGD's momentum, the gradient buckets).
A rank that only emulates compute never imports torch (that is the point of
emulating), so it is counted as needing nothing here. A lower bound of the
real peak: allocator slack, the backward's temporaries and library memory
are left out.
"""

from __future__ import annotations

import math

from hpcbench.runtime.memory import MemoryNeed

__all__ = ["memory_need", "model_bytes"]

#: one sample's input shape and the classes of each data set read before its files are (IDX sets: MNIST's size)
_SHAPES = {"digits": ((1, 8, 8), 10), "shakespeare": ((80,), 65), "fashion_mnist": ((1, 28, 28), 10),
           "idx": ((1, 28, 28), 10)}


def _shape(data: str, image_size: int) -> tuple[tuple[int, ...], int]:
    return ((3, image_size, image_size), 1000) if data == "synthetic" else _SHAPES[data]


def model_bytes(model: str, batch_size: int, image_size: int, data: str | None = None,
                options: dict | None = None) -> tuple[int, int]:
    """(parameter bytes, activation bytes of one forward pass) of ``model`` at ``batch_size`` (float32).

    ``data`` is the data set it trains on (default: the model's own). Built
    and run on the meta device: nothing is allocated, whatever the sizes.
    Activations are 0 where the meta forward cannot run (the real build then
    reports the problem).
    """
    import torch

    from hpcbench.train.workloads.models import MODELS

    spec = MODELS[model]
    sample, classes = _shape(data or spec.task, image_size)
    with torch.device("meta"):
        net = spec.build(sample, classes, options or {})
    params = sum(p.numel() * p.element_size() for p in net.parameters())
    shape = (batch_size, *sample)
    total = [0]

    def count(module, inputs, output):
        if isinstance(output, torch.Tensor):
            total[0] += output.numel() * output.element_size()

    hooks = [m.register_forward_hook(count) for m in net.modules() if not list(m.children())]
    try:
        net(torch.empty(shape, device="meta"))
    except Exception:  # noqa: BLE001 - a shape the model cannot take: the real build says why
        total[0] = 0
    finally:
        for h in hooks:
            h.remove()
    return int(params), int(total[0])


def memory_need(cfg, trains: bool) -> MemoryNeed:
    """This rank's estimated peak (``trains``: it builds the model and data; else it emulates).

    Parameters
    ----------
    cfg : hpcbench.train.config.TrainConfig
    trains : bool
        Whether this rank runs the model (real compute, or rank 0 profiling it).
    """
    from hpcbench.datasets.callables import is_callable_name

    data = cfg.data_name()
    keys = f"model={cfg.model}, data={data}, image_size={cfg.image_size}, batch_size={cfg.batch_size}"
    if not trains or is_callable_name(cfg.model) or is_callable_name(data):
        return MemoryNeed(0, keys)   # a user's model or data: nothing known until its factory runs
    params, activations = model_bytes(cfg.model, cfg.batch_size, cfg.image_size, data, cfg.model_options)
    shape = math.prod(_shape(data, cfg.image_size)[0])
    return MemoryNeed(4 * params + activations + 4 * cfg.batch_size * shape, keys)

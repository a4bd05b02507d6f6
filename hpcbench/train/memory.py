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

from hpcbench.runtime.memory import MemoryNeed

__all__ = ["memory_need", "model_bytes"]

_DIGITS_SHAPE = (1, 8, 8)


def model_bytes(model: str, batch_size: int, image_size: int) -> tuple[int, int]:
    """(parameter bytes, activation bytes of one forward pass) of ``model`` at ``batch_size`` (float32).

    Built and run on the meta device: nothing is allocated, whatever the sizes.
    Activations are 0 where the meta forward cannot run (the real build then
    reports the problem).
    """
    import torch

    from hpcbench.train.workloads.models import MODELS

    spec = MODELS[model]
    with torch.device("meta"):
        net = spec.build()
    params = sum(p.numel() * p.element_size() for p in net.parameters())
    shape = (batch_size, 3, image_size, image_size) if spec.task == "synthetic" else (batch_size, *_DIGITS_SHAPE)
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
    keys = f"model={cfg.model}, image_size={cfg.image_size}, batch_size={cfg.batch_size}"
    if not trains:
        return MemoryNeed(0, keys)
    params, activations = model_bytes(cfg.model, cfg.batch_size, cfg.image_size)
    shape = 3 * cfg.image_size ** 2 if _synthetic(cfg.model) else 64
    return MemoryNeed(4 * params + activations + 4 * cfg.batch_size * shape, keys)


def _synthetic(model: str) -> bool:
    from hpcbench.train.workloads.models import MODELS

    return MODELS[model].task == "synthetic"

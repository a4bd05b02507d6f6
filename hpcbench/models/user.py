"""A user's model factory (``model.name: package.module:callable``) called and its module checked.

The contract (docs/byo.md, one for every runner): ``factory(config, seed,
num_classes)`` returns a ``torch.nn.Module`` with trainable parameters that
maps float32 inputs ``(B, *input_shape)`` to float logits ``(B, num_classes)``.
"""

from __future__ import annotations

from hpcbench.datasets.callables import resolve_callable
from hpcbench.runtime.errors import InputError

__all__ = ["build_user_model"]


def build_user_model(name: str, key: str, config: dict, seed: int, num_classes: int, sample):
    """Call the factory ``name`` and check the module it returns on ``sample``.

    Parameters
    ----------
    name : str
        ``package.module:callable``.
    key : str
        The config key naming it (``model.name``, ``model``), for messages.
    config : dict
        What the factory receives as its config (the runner's model section, its ``options`` mapping).
    seed : int
        The job's seed (the caller seeds torch's generator just before).
    num_classes : int
        The dataset's classes.
    sample : torch.Tensor
        float32 ``(k, *input_shape)``: a few inputs of the dataset (two are enough).

    Returns
    -------
    torch.nn.Module
        The factory's module, unchanged.

    Raises
    ------
    InputError
        Naming ``key``, the callable and what was wrong: it cannot be resolved,
        the factory raised, returned no module or one without trainable
        parameters, its forward pass raised, or its output on ``sample`` is not
        float ``(k, num_classes)``.
    """
    import torch
    from torch import nn

    where = f"{key}: {name!r}"
    factory = resolve_callable(name, key)
    try:
        module = factory(config, seed, num_classes)
    except Exception as exc:
        raise InputError(f"{where} raised {type(exc).__name__}: {exc}") from None
    if not isinstance(module, nn.Module):
        raise InputError(f"{where} returned a {type(module).__name__}; expected a torch.nn.Module")
    if not any(p.requires_grad for p in module.parameters()):
        raise InputError(f"{where} returned a module without trainable parameters")
    try:
        with torch.no_grad():
            out = module(sample)
    except Exception as exc:
        raise InputError(f"{where}: the module's forward pass on inputs of shape {tuple(sample.shape)} float32 "
                         f"raised {type(exc).__name__}: {exc}") from None
    want = (len(sample), num_classes)
    if not isinstance(out, torch.Tensor) or tuple(out.shape) != want or not out.is_floating_point():
        got = f"{tuple(out.shape)} {out.dtype}" if isinstance(out, torch.Tensor) else type(out).__name__
        raise InputError(f"{where}: the module maps inputs of shape {tuple(sample.shape)} to {got}; expected float "
                         f"logits of shape {want}")
    return module

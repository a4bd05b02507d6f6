"""Scale a device trace's compute latency to the model actually trained (``traces.compute_cost: flops``).

The FLHetBench device trace gives each phone's measured training latency of a
*reference* model: its ``ResNet`` column of ResNet-50, its ``ViT`` column of
ViT-B/16 (FLHetBench's benchmark trains those two, from timm). Charged as is
(``compute_cost: trace``, the default and FedScale's behaviour: FedScale's
``get_completion_time`` charges ``3 x batch_size x local_steps x
compute_speed`` whatever model is trained), a 5,000-parameter MLP costs a
client as much compute as ResNet-50 while the wire carries the MLP's 19 kB,
so communication, and any compressor, cannot matter.

``compute_cost: flops`` multiplies the per-sample latency by

    cost_ratio = forward MACs per sample of the trained model
                 / forward MACs per sample of the trace column's model

(the scaling by model FLOPs that FedScale-derived simulators such as EvoFed
apply to FedScale's device speeds). Forward MACs stand for training cost:
backward costs about twice the forward for both models (the factor 3 of
FedScale), so the ratio of training costs is the ratio of forward costs.
Reference MACs at 224 x 224 are torchvision's published figures
(``ResNet50_Weights.IMAGENET1K_V1``: 4.09 GFLOPS; ``ViT_B_16_Weights``:
17.56 GFLOPS; torchvision counts one multiply-accumulate as one FLOP). The
model's MACs are counted by ``torch.utils.flop_counter.FlopCounterMode``
(two FLOPs per MAC) on one forward pass of test examples; recurrent layers,
which that counter does not see on CPU, are added by formula
(``4 H (I + H)`` MACs per step, layer and direction of an LSTM).

Limits: FLOPs do not capture memory-bound layers, per-step overheads or a
phone's different efficiency on small kernels, so ``flops`` is a lower bound
on a small model's compute; it is a documented approximation, not a
measurement.
"""

from __future__ import annotations

import torch
from torch import nn

__all__ = ["REFERENCE_FORWARD_MACS", "forward_macs_per_sample", "compute_cost_ratio"]

#: forward multiply-accumulates per 224 x 224 image of the model behind each FLHetBench column (torchvision)
REFERENCE_FORWARD_MACS = {"ResNet": 4.09e9, "ViT": 17.56e9}


def _lstm_macs(module: nn.LSTM, batch: int, steps: int) -> float:
    """Gate MACs of an LSTM's forward: ``4 H (I_l + H)`` per step, layer and direction (projections excluded)."""
    hidden, dirs = module.hidden_size, 2 if module.bidirectional else 1
    total = 0
    for layer in range(module.num_layers):
        inputs = module.input_size if layer == 0 else hidden * dirs
        total += dirs * 4 * hidden * (inputs + hidden)
    return float(total * batch * steps)


@torch.no_grad()
def forward_macs_per_sample(model: nn.Module, x: torch.Tensor) -> float:
    """Multiply-accumulates of one forward pass, per example of ``x``.

    Parameters
    ----------
    model : torch.nn.Module
        Not modified (evaluated in its current mode under ``no_grad``).
    x : torch.Tensor of shape (B, ...)
        ``B >= 1`` inputs as the model reads them (float features, int64 tokens).

    Returns
    -------
    float
        MACs per example: ``FlopCounterMode``'s FLOPs / 2, plus the LSTM
        gates by formula (batch-first ``(B, T, ...)`` inputs: ``T`` steps).

    Raises
    ------
    ValueError
        ``x`` is empty, or nothing was counted (a model made only of layers
        neither the counter nor the formulas know).
    """
    from torch.utils.flop_counter import FlopCounterMode

    if x.ndim == 0 or x.shape[0] == 0:
        raise ValueError(f"need at least one example, got input of shape {tuple(x.shape)}")
    extra = []

    def hook(module, args, _out):
        seq = args[0]
        batch, steps = (seq.shape[0], seq.shape[1]) if module.batch_first else (seq.shape[1], seq.shape[0])
        extra.append(_lstm_macs(module, batch, steps) if seq.ndim == 3 else _lstm_macs(module, 1, seq.shape[0]))

    handles = [m.register_forward_hook(hook) for m in model.modules() if isinstance(m, nn.LSTM)]
    try:
        with FlopCounterMode(display=False) as counter:
            model(x)
    finally:
        for h in handles:
            h.remove()
    macs = counter.get_total_flops() / 2 + sum(extra)
    if macs <= 0:
        raise ValueError(f"no multiply-accumulate counted in {type(model).__name__}")
    return macs / x.shape[0]


def compute_cost_ratio(model: nn.Module, x: torch.Tensor, column: str) -> float:
    """``cost_ratio`` of the module docstring: the model's forward MACs over the ``column`` reference's.

    Parameters
    ----------
    model : torch.nn.Module
    x : torch.Tensor of shape (B, ...)
        Example inputs (a few test examples).
    column : {"ResNet", "ViT"}
        The FLHetBench device-trace column whose latency is scaled.

    Returns
    -------
    float
        Dimensionless factor on the per-sample latency, > 0.

    Raises
    ------
    ValueError
        Unknown ``column``, or see :func:`forward_macs_per_sample`.
    """
    if column not in REFERENCE_FORWARD_MACS:
        raise ValueError(f"no reference model for device-trace column {column!r}; "
                         f"known: {', '.join(REFERENCE_FORWARD_MACS)}")
    return forward_macs_per_sample(model, x) / REFERENCE_FORWARD_MACS[column]

"""The plain PyTorch training loop beside ``hpcbench train --device cuda``: same model, batch and data.

``scripts/gpu_measure.sh`` runs this on the card that its phase 1 ran on, so that hpcbench's
single-GPU img/s has a like-for-like reference measured in the same lease: torchvision's model with
random weights, synthetic images and labels already on the device (KungFu's synthetic benchmark),
``torch.optim.SGD`` without momentum and one CPU thread (as the training runner's ranks), warm-up steps untimed, then timed
steps with ``torch.cuda.synchronize()`` before each clock read. Two precisions:

- ``fp32``: torch's defaults (cuDNN TF32 convolutions on, TF32 matmuls off), hpcbench's precision;
- ``amp-bf16``: ``torch.autocast(dtype=torch.bfloat16)``, the mixed-precision column of NVIDIA's
  published tables (NVIDIA DeepLearningExamples, ``PyTorch/Classification/ConvNets/resnet50v1.5``,
  uses fp16 with a loss scaler and DALI; bf16 needs no scaler).

Usage::

    python scripts/gpu_bare_resnet.py --model resnet50 --image-size 224 --batch 64 --steps 30

Prints one line per precision (img/s, ms per step) and the card's name; ``--json FILE`` also writes
every printed figure, every timed step's seconds and the provenance (commit, host, card, torch, date,
load average) to ``FILE``. Runs on the CPU too (``--device cpu``), which is how it is checked without a
GPU.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import statistics
import time
from pathlib import Path

import torch

from hpcbench.train.tvimport import import_torchvision


def measure(model_name: str, image: int, batch: int, steps: int, warmup: int, device: str, amp: bool) -> list[float]:
    """Seconds per training step of ``steps`` timed steps after ``warmup`` untimed ones.

    Parameters
    ----------
    model_name : str
        A torchvision classification model (``resnet50``).
    image, batch : int
        Image side in pixels and images per step.
    steps, warmup : int
        Timed and untimed steps.
    device : str
        ``cuda`` or ``cpu``.
    amp : bool
        Forward and loss under ``torch.autocast`` in bfloat16.

    Returns
    -------
    list of float
        Each timed step's wall time in seconds (device synchronised before each clock read).
    """
    tv = import_torchvision()
    torch.manual_seed(0)
    model = getattr(tv.models, model_name)(weights=None).to(device)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x = torch.randn(batch, 3, image, image, device=device)
    y = torch.randint(0, 1000, (batch,), device=device)
    sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)
    ctx = (lambda: torch.autocast(device_type=device, dtype=torch.bfloat16)) if amp else contextlib.nullcontext
    times = []
    for i in range(warmup + steps):
        sync()
        t0 = time.perf_counter()
        with ctx():
            loss = torch.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        sync()
        if i >= warmup:
            times.append(time.perf_counter() - t0)
    return times


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="resnet50")
    ap.add_argument("--image-size", type=int, default=224)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--warmup", type=int, default=10)
    ap.add_argument("--device", default="cuda", choices=["cuda", "cpu"])
    ap.add_argument("--precisions", default="fp32,amp-bf16")
    ap.add_argument("--threads", type=int, default=1, help="torch CPU threads (1: as hpcbench's ranks)")
    ap.add_argument("--json", type=Path, default=None, help="also write every figure and step time here")
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    card = torch.cuda.get_device_name() if a.device == "cuda" else "cpu"
    print(f"bare PyTorch loop: {a.model} {a.image_size}x{a.image_size}, batch {a.batch}, {a.steps} timed steps "
          f"after {a.warmup}, card {card}, torch {torch.__version__}")
    from hpcbench.runtime.provenance import git_commit, utc_now

    kept = {"provenance": {"commit": git_commit(), "host": platform.node(), "card": card,
                           "torch": torch.__version__, "cpu_threads": a.threads, "date": utc_now(),
                           "load_average": [round(x, 2) for x in os.getloadavg()],
                           "settings": {"model": a.model, "image_size": a.image_size, "batch": a.batch,
                                        "steps": a.steps, "warmup": a.warmup, "device": a.device}},
            "precisions": {}}
    for prec in a.precisions.split(","):
        t = measure(a.model, a.image_size, a.batch, a.steps, a.warmup, a.device, prec == "amp-bf16")
        med = statistics.median(t)
        print(f"bare {prec:>9}: {a.batch / med:8.1f} img/s  (median {med * 1e3:.2f} ms per step, "
              f"mean {statistics.fmean(t) * 1e3:.2f} ms)")
        kept["precisions"][prec] = {"img_per_s": a.batch / med, "median_step_s": med,
                                    "mean_step_s": statistics.fmean(t), "step_s": t}
    if a.json is not None:
        tmp = a.json.with_name(a.json.name + ".tmp")
        tmp.write_text(json.dumps(kept, indent=1) + "\n", encoding="utf-8")
        tmp.replace(a.json)


if __name__ == "__main__":
    main()

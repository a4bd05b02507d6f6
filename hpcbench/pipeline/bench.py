"""``python -m hpcbench.pipeline.bench``: allocator solve time and quality at Sky Computing's scale.

One process, no MPI. Builds the allocation instance of the BERT-style model
(layers profiled here), ``--devices`` devices with half of them ``--ratio``
times slower (or ``--speed trace``), memory caps and modelled links, then
runs every allocator on the same instance and prints, side by side: solve
time, bottleneck and predicted iteration time; the solve-time ratio of
``sky-milp`` to ``optimal``; the gap by which the MILP's free device order
beats ``optimal`` in the given order (if it does), and what the order search
(``optimal``, ``order=search``) makes of it.
"""

from __future__ import annotations

import argparse
import sys

import numpy as np

__all__ = ["main"]


def build_instance(args):
    """The allocation instance of the bench (profiles the model in this process)."""
    import torch

    from hpcbench.allocation import Instance
    from hpcbench.pipeline.config import ModelConfig
    from hpcbench.pipeline.devices import speed_factors
    from hpcbench.pipeline.model import build_layers
    from hpcbench.pipeline.profiler import profile_layers

    torch.set_num_threads(1)
    mcfg = ModelConfig(layers=args.layers - 3, hidden=args.hidden, heads=4, seq_len=32)
    prof = profile_layers(build_layers(mcfg, 0), mcfg, args.micro_batch, 0, reps=3)
    slow = speed_factors("trace" if args.speed == "trace" else f"{args.ratio}:1", args.devices, args.seed)
    caps = np.full(args.devices, prof.mem_bytes.sum() / args.devices * args.mem_slack)
    spb = np.full(args.devices, 8.0 / args.bandwidth_bps)
    return Instance(prof.time_s, prof.mem_bytes, prof.out_bytes, slow, caps, spb, args.latency_s,
                    args.micro_batches, prof.forward_fraction)


def main(argv: list[str] | None = None) -> int:
    """Run the bench; returns the exit status."""
    import warnings

    from hpcbench.allocation import allocate

    warnings.filterwarnings("ignore", category=DeprecationWarning)
    ap = argparse.ArgumentParser(prog="hpcbench.pipeline.bench", description=__doc__.split("\n\n")[0])
    ap.add_argument("--layers", type=int, default=160)
    ap.add_argument("--devices", type=int, default=64)
    ap.add_argument("--hidden", type=int, default=64)
    ap.add_argument("--micro-batch", type=int, default=8)
    ap.add_argument("--micro-batches", type=int, default=8)
    ap.add_argument("--ratio", type=float, default=4.0)
    ap.add_argument("--speed", choices=["ratio", "trace"], default="ratio")
    ap.add_argument("--mem-slack", type=float, default=2.0, help="cap = slack x total memory / devices")
    ap.add_argument("--bandwidth-bps", type=float, default=1e9)
    ap.add_argument("--latency-s", type=float, default=1e-4)
    ap.add_argument("--time-limit", type=float, default=300.0, help="CBC time limit (Sky: 300 s)")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    inst = build_instance(args)
    print(f"instance: {inst.num_layers} layers x {inst.num_devices} devices, slowdowns "
          f"{np.round(np.unique(inst.slowdown), 2).tolist()[:6]}, m={inst.micro_batches}, "
          f"cap {inst.mem_cap_bytes[0] / 1e6:.3g} MB, link {args.bandwidth_bps:.3g} bit/s")
    runs = [("even", {}), ("sky-dynamic", {}), ("optimal", {}), ("optimal", {"order": "search"}),
            ("sky-milp", {"order": "fixed", "time_limit_s": args.time_limit}),
            ("sky-milp", {"order": "free", "time_limit_s": args.time_limit})]
    print(f"{'allocator':<22} {'solve(s)':>10} {'bottleneck(ms)':>15} {'predicted(ms)':>14} {'vs even':>8}")
    res = {}
    for name, opts in runs:
        label = name + (f" ({opts['order']})" if "order" in opts else "")
        a = allocate(name, inst, **opts)
        res[label] = a
        print(f"{label:<22} {a.solve_s:>10.4g} {a.bottleneck_s * 1e3:>15.5g} {a.predicted_iteration_s * 1e3:>14.5g} "
              f"{res['even'].predicted_iteration_s / a.predicted_iteration_s:>8.2f}"
              + (f"  [{a.info.get('solver_status')}]" if name == "sky-milp" else ""))
        sys.stdout.flush()
    opt, search = res["optimal"], res["optimal (search)"]
    fixed, free = res["sky-milp (fixed)"], res["sky-milp (free)"]
    print(f"solve time: sky-milp (fixed order) / optimal = {fixed.solve_s / opt.solve_s:.0f}x, "
          f"sky-milp (free) / optimal = {free.solve_s / opt.solve_s:.0f}x")
    print(f"optimal vs sky-dynamic bottleneck: {res['sky-dynamic'].bottleneck_s / opt.bottleneck_s:.3f}x; "
          f"vs sky-milp (same order): {fixed.bottleneck_s / opt.bottleneck_s:.3f}x")
    gap = opt.bottleneck_s / free.bottleneck_s - 1
    if gap > 0:
        print(f"free-order MILP beats optimal (given order) by {100 * gap:.2f}% in bottleneck; "
              f"order search: {100 * (search.bottleneck_s / free.bottleneck_s - 1):+.2f}% vs the MILP")
    else:
        print(f"free-order MILP does not beat optimal (given order): {-100 * gap:.2f}% worse; order search "
              f"{100 * (search.bottleneck_s / free.bottleneck_s - 1):+.2f}% vs the MILP")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""``python -m hpcbench.pipeline.bench``: layer allocators' solve time and quality, Sky's MILP per solver.

For every size ``LxD`` of ``--sizes`` (default ``160x64``, Sky Computing's
scale) the bench profiles the BERT-style model's ``L`` layers in this
process, builds the allocation instance (``D`` devices, every other one
``--ratio`` times slower or ``--speed trace``, memory caps, modelled links)
and runs on it ``even``, ``sky-dynamic``, ``optimal`` (given order and order
search) and ``sky-milp`` in each order of ``--orders`` with each solver of
``--solvers`` (CBC, HiGHS). One row per run: solve time, bottleneck,
predicted iteration time and, for the MILP, what the solver achieved: its
status (``optimal``, ``gap limit``, ``time limit``, ``no solution``; ``+ws``
when the answer is the even split it started from), the objective, the
proven lower bound, the relative gap and the branch-and-bound nodes. Each
size ends with the fixed-order MILP's objective against ``optimal``'s
compute bottleneck in the same order (equal when the MILP is solved to
optimality) and the solve-time ratios, labelled with the MILP's status.

One process (no MPI needed); ``--output`` gets one HDF5 file (kind
``allocation``): table ``solves`` (:data:`COLUMNS`) and, per size, the
instance under ``instances/LxD/``. ``analysis/plot_allocation.py`` draws
solve time and gap against size from it.
"""

from __future__ import annotations

import dataclasses
import os
import sys

import numpy as np

from hpcbench.lifecycle import Job
from hpcbench.runtime.errors import InputError
from hpcbench.runtime.faults import fault_point

__all__ = ["AllocationBenchJob", "COLUMNS", "build_instance", "main"]

#: (name, dtype, units, description) of the ``solves`` table
COLUMNS = [
    ("layers", "int64", "1", "layers L of the instance"),
    ("devices", "int64", "1", "devices (pipeline stages) D of the instance"),
    ("allocator", "str", "", "registry name of the allocator"),
    ("order", "str", "", "device order: given / search (optimal), fixed / free (sky-milp), given (others)"),
    ("solver", "str", "", "MILP solver (cbc, highs); empty for the other allocators"),
    ("status", "str", "", "MILP: optimal / gap limit / time limit / no solution; exact (optimal), heuristic"),
    ("warm_start_returned", "int8", "1", "1 when the MILP's answer is the even split it started from"),
    ("solve_s", "float64", "s", "wall time of the allocator (model building and solver included)"),
    ("bottleneck_s", "float64", "s", "largest stage or link time per micro-batch of the allocation"),
    ("compute_bottleneck_s", "float64", "s", "largest stage compute time per micro-batch (the MILP's objective)"),
    ("predicted_iteration_s", "float64", "s", "simulated iteration time under the GPipe schedule"),
    ("objective_s", "float64", "s", "MILP objective of the answer (largest stage compute time); NaN otherwise"),
    ("bound_s", "float64", "s", "the MILP solver's proven lower bound on the objective; NaN if none"),
    ("gap", "float64", "1", "(objective - bound) / objective of the MILP answer; NaN if no bound"),
    ("nodes", "int64", "1", "branch-and-bound nodes the MILP solver explored"),
    ("reference_s", "float64", "s", "optimal's bottleneck for the given order with free links (the "
                                    "fixed-order MILP's optimum)"),
    ("time_limit_s", "float64", "s", "MILP time limit"),
    ("gap_rel", "float64", "1", "MILP relative gap at which the solver stops"),
    ("threads", "int64", "1", "MILP solver threads"),
    ("load_1min", "float64", "1", "1-minute load average of the machine when the row started"),
]


def _sizes(text: str) -> list[tuple[int, int]]:
    out = []
    for item in str(text).split(","):
        try:
            layers, devices = (int(v) for v in item.lower().split("x"))
        except ValueError:
            raise InputError(f"sizes: expected LAYERSxDEVICES items such as 160x64, got {item!r}") from None
        if not 4 <= layers or not 1 <= devices <= layers:
            raise InputError(f"sizes: need layers >= 4 and 1 <= devices <= layers, got {item!r}")
        out.append((layers, devices))
    return out


def _names(text: str, key: str, known) -> list[str]:
    names = [v.strip() for v in str(text).split(",") if v.strip()]
    bad = [n for n in names if n not in known]
    if not names or bad:
        raise InputError(f"{key}: unknown {bad[0] if bad else 'empty list'!r}; choose from {', '.join(known)}")
    return names


def build_instance(layers: int, devices: int, cfg: dict):
    """The allocation instance of one size (profiles the model's layers in this process)."""
    import torch

    from hpcbench.allocation import Instance
    from hpcbench.pipeline.config import ModelConfig
    from hpcbench.pipeline.devices import speed_factors
    from hpcbench.pipeline.model import build_layers
    from hpcbench.pipeline.profiler import profile_layers

    torch.set_num_threads(1)
    mcfg = ModelConfig(layers=layers - 3, hidden=cfg["hidden"], heads=4, seq_len=32)
    prof = profile_layers(build_layers(mcfg, 0), mcfg, cfg["micro_batch"], 0, reps=3)
    slow = speed_factors("trace" if cfg["speed"] == "trace" else f"{cfg['ratio']}:1", devices, cfg["seed"])
    caps = np.full(devices, prof.mem_bytes.sum() / devices * cfg["mem_slack"])
    spb = np.full(devices, 8.0 / cfg["bandwidth_bps"])
    return Instance(prof.time_s, prof.mem_bytes, prof.out_bytes, slow, caps, spb, cfg["latency_s"],
                    cfg["micro_batches"], prof.forward_fraction)


def _status(alloc) -> str:
    if alloc.method != "sky-milp":
        return "exact" if alloc.method == "optimal" and alloc.info.get("order_mode") == "given" else "heuristic"
    return alloc.info["solver_status"] + ("+ws" if alloc.info["warm_start_returned"] else "")


class AllocationBenchJob(Job):
    """Every allocator on the same instances; Sky's MILP with each solver, with what the solver achieved."""

    prog = "hpcbench.pipeline.bench"
    kind = "allocation"
    description = __doc__

    def add_arguments(self, parser) -> None:
        from hpcbench.allocation.milp import SOLVERS

        parser.add_argument("--sizes", default="160x64", help="comma list of LAYERSxDEVICES (default 160x64)")
        parser.add_argument("--solvers", default=",".join(SOLVERS), help="comma list of MILP solvers")
        parser.add_argument("--orders", default="fixed,free", help="sky-milp device orders: fixed, free")
        parser.add_argument("--time-limit", type=float, default=300.0, help="MILP time limit, s (Sky: 300)")
        parser.add_argument("--gap-rel", type=float, default=0.2,
                            help="MILP relative gap at which to stop (Sky: 0.2; 0: to optimality)")
        parser.add_argument("--threads", type=int, default=1, help="MILP solver threads (Sky: 24)")
        parser.add_argument("--hidden", type=int, default=64)
        parser.add_argument("--micro-batch", type=int, default=8)
        parser.add_argument("--micro-batches", type=int, default=8)
        parser.add_argument("--ratio", type=float, default=4.0, help="slowdown of every other device")
        parser.add_argument("--speed", choices=["ratio", "trace"], default="ratio")
        parser.add_argument("--mem-slack", type=float, default=2.0, help="cap = slack x total memory / devices")
        parser.add_argument("--bandwidth-bps", type=float, default=1e9)
        parser.add_argument("--latency-s", type=float, default=1e-4)
        parser.add_argument("--seed", type=int, default=0)
        parser.add_argument("--output", default="results/allocation-{start}.h5",
                            help="HDF5 result file template ({start} is the start time)")

    def configure(self, args) -> None:
        from hpcbench.allocation.milp import SOLVERS

        for key in ("time_limit", "ratio", "mem_slack", "bandwidth_bps"):
            if not getattr(args, key) > 0:
                raise InputError(f"{key.replace('_', '-')}: must be > 0, got {getattr(args, key)!r}")
        for key in ("gap_rel", "latency_s"):
            if not getattr(args, key) >= 0:
                raise InputError(f"{key.replace('_', '-')}: must be >= 0, got {getattr(args, key)!r}")
        for key in ("threads", "hidden", "micro_batch", "micro_batches"):
            if getattr(args, key) < 1:
                raise InputError(f"{key.replace('_', '-')}: must be >= 1, got {getattr(args, key)!r}")
        self.cfg = dict(sizes=_sizes(args.sizes), solvers=_names(args.solvers, "solvers", SOLVERS),
                        orders=_names(args.orders, "orders", ("fixed", "free")), time_limit_s=args.time_limit,
                        gap_rel=args.gap_rel, threads=args.threads, hidden=args.hidden,
                        micro_batch=args.micro_batch, micro_batches=args.micro_batches, ratio=args.ratio,
                        speed=args.speed, mem_slack=args.mem_slack, bandwidth_bps=args.bandwidth_bps,
                        latency_s=args.latency_s, seed=args.seed, output=args.output)

    def output(self):
        return self.cfg["output"], {}

    def config_record(self):
        return {**self.cfg, "sizes": [f"{l}x{d}" for l, d in self.cfg["sizes"]]}

    def provenance(self) -> dict:
        from importlib.metadata import version

        return {"pulp_version": version("PuLP"), "highspy_version": version("highspy"),
                "milp_threads": self.cfg["threads"]}

    def run(self, results) -> int:
        from hpcbench.results import Column

        cfg = self.cfg
        table = results.table("solves", [Column(*c) for c in COLUMNS],
                              "one allocator run per row (sky-milp: one per order and solver)") \
            if results is not None else None
        milp = [("sky-milp", {"order": o, "solver": s, "time_limit_s": cfg["time_limit_s"],
                              "gap_rel": cfg["gap_rel"], "threads": cfg["threads"]})
                for o in cfg["orders"] for s in cfg["solvers"]]
        runs = [("even", {}), ("sky-dynamic", {}), ("optimal", {}), ("optimal", {"order": "search"}), *milp]
        print(f"# MILP: time limit {cfg['time_limit_s']:g} s, relative gap {cfg['gap_rel']:g}, "
              f"{cfg['threads']} thread(s); status +ws: the answer is the even split the solver started from")
        for step, (layers, devices) in enumerate(cfg["sizes"]):
            fault_point(step)
            self._size(layers, devices, runs, table, results)
        return 0

    def _size(self, layers: int, devices: int, runs, table, results) -> None:
        from hpcbench.allocation import allocate

        cfg = self.cfg
        inst = build_instance(layers, devices, cfg)
        if results is not None:
            for name, units in (("layer_time_s", "s"), ("layer_mem_bytes", "B"), ("layer_out_bytes", "B"),
                                ("slowdown", "1"), ("mem_cap_bytes", "B"), ("link_s_per_byte", "s/B")):
                results.write_array(f"instances/{layers}x{devices}/{name}", getattr(inst, name), units)
        free_links = dataclasses.replace(inst, link_s_per_byte=np.zeros(devices), link_latency_s=0.0)
        reference = allocate("optimal", free_links).bottleneck_s
        print(f"\ninstance {layers}x{devices}: slowdowns {np.round(np.unique(inst.slowdown), 2).tolist()[:6]}, "
              f"m={inst.micro_batches}, cap {inst.mem_cap_bytes[0] / 1e6:.3g} MB, link "
              f"{cfg['bandwidth_bps']:.3g} bit/s; optimal (given order, free links) {reference * 1e3:.5g} ms")
        print(f"{'allocator':<24} {'solve(s)':>9} {'bottleneck(ms)':>14} {'predicted(ms)':>13} {'vs even':>7}  "
              f"{'status':<16} {'objective(ms)':>13} {'bound(ms)':>10} {'gap':>7} {'nodes':>6} {'load':>5}")
        res = {}
        for name, opts in runs:
            load = os.getloadavg()[0]
            a = allocate(name, inst, **opts)
            label = name + "".join(f" {opts[k]}" for k in ("order", "solver") if k in opts)
            res[label] = a
            info = a.info if name == "sky-milp" else {}
            even = res["even"].predicted_iteration_s
            obj, bound, gap = (info.get(k, np.nan) for k in ("milp_objective_s", "milp_bound_s", "milp_gap"))
            milp_cols = (f"{obj * 1e3:>13.5g} {bound * 1e3:>10.5g} {gap:>7.1%} {info['milp_nodes']:>6d}" if info
                         else f"{'-':>13} {'-':>10} {'-':>7} {'-':>6}")
            print(f"{label:<24} {a.solve_s:>9.4g} {a.bottleneck_s * 1e3:>14.5g} {a.predicted_iteration_s * 1e3:>13.5g} "
                  f"{even / a.predicted_iteration_s:>7.2f}  {_status(a):<16} {milp_cols} {load:>5.2f}")
            sys.stdout.flush()
            if table is not None:
                table.append({"layers": layers, "devices": devices, "allocator": name,
                              "order": opts.get("order", "given"), "solver": opts.get("solver", ""),
                              "status": _status(a), "warm_start_returned": int(info.get("warm_start_returned", 0)),
                              "solve_s": a.solve_s, "bottleneck_s": a.bottleneck_s,
                              "compute_bottleneck_s": float(inst.stage_times_s(a).max()),
                              "predicted_iteration_s": a.predicted_iteration_s, "objective_s": obj,
                              "bound_s": bound, "gap": gap, "nodes": info.get("milp_nodes", 0),
                              "reference_s": reference, "time_limit_s": cfg["time_limit_s"],
                              "gap_rel": cfg["gap_rel"], "threads": cfg["threads"], "load_1min": load})
        self._summary(res, reference)

    @staticmethod
    def _summary(res: dict, reference: float) -> None:
        opt = res["optimal"]
        for label, a in res.items():
            if not label.startswith("sky-milp"):
                continue
            what = f"{label} [{_status(a)}, gap {a.info['milp_gap']:.1%}]"
            line = (f"{what}: solve time {a.solve_s / opt.solve_s:.0f}x optimal's; bottleneck "
                    f"{a.bottleneck_s / opt.bottleneck_s:.3f}x optimal's")
            if a.info["order_mode"] == "fixed":
                line += f"; objective / optimal's (same order, free links) = {a.info['milp_objective_s'] / reference:.6f}"
            else:
                line += f", {a.bottleneck_s / res['optimal search'].bottleneck_s:.3f}x optimal's with order search"
            print(line)


def main(argv: list[str] | None = None) -> int:
    """Entry point: the shared lifecycle with :class:`AllocationBenchJob`."""
    from hpcbench.lifecycle import main as run_main

    return run_main("hpcbench.pipeline.bench:AllocationBenchJob", argv)


if __name__ == "__main__":
    sys.exit(main())

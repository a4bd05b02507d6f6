"""``python -m hpcbench.pipeline``: pipeline stages on MPI ranks, with the allocators run side by side."""

from __future__ import annotations

import copy
import math
import sys

import numpy as np

from hpcbench.lifecycle import Job
from hpcbench.pipeline.declaration import PIPELINE
from hpcbench.runtime.errors import InputError
from hpcbench.runtime.faults import fault_point
from hpcbench.runtime.texttable import fmt

__all__ = ["PipelineJob"]


def _tables(results):
    from hpcbench.results import Column as C

    alloc = results.table("allocations", [
        C("allocator", "str", "", "allocator name"),
        C("stages", "int64", "1", "pipeline stages (ranks)"),
        C("layers_per_stage", "str", "", "layers of each stage, comma-separated"),
        C("device_order", "str", "", "device of each stage, comma-separated"),
        C("solve_s", "float64", "s", "time the allocator took"),
        C("bottleneck_s", "float64", "s", "predicted busiest stage or link time per micro-batch"),
        C("predicted_iteration_s", "float64", "s", "predicted iteration time (schedule simulation)"),
        C("measured_iteration_s", "float64", "s", "median measured iteration time (modelled seconds)"),
        C("measured_final_s", "float64", "s", "median measured iteration time of the last `adaptive.every` "
                                                 "iterations"),
        C("predicted_optimal_final_s", "float64", "s", "optimal allocation's predicted time for the final "
                                                          "device speeds"),
        C("rebalances", "int64", "1", "re-balances done (adaptive)"),
    ], "one row per allocator run")
    iters = results.table("iterations", [
        C("allocator", "str", "", ""), C("iteration", "int64", "1", "counted from 1, warm-up included"),
        C("warmup", "bool", "1", "a warm-up iteration (not in the medians)"),
        C("time_s", "float64", "s", "slowest rank's iteration time (modelled seconds)"),
        C("loss", "float64", "1", "mean training loss (real compute)"),
        C("bubble_fraction", "float64", "1", "1 - sum(stage busy) / (stages x iteration time)"),
        C("layers_per_stage", "str", "", "allocation in force"),
    ], "one row per iteration")
    timeline = results.table("timeline", [
        C("allocator", "str", "", ""), C("stage", "int64", "1", ""),
        C("action", "str", "", "F (forward) or B (backward)"), C("micro_batch", "int64", "1", ""),
        C("ready_s", "float64", "s", "stage free, waiting for its input"),
        C("start_s", "float64", "s", "input there, compute starts"),
        C("end_s", "float64", "s", "compute ends (sends are asynchronous)"),
    ], "every action of each allocator's last iteration, from the iteration's start")
    return alloc, iters, timeline


def _trace_iteration(recorder, rec, allocator: str, iteration: int, opt_start: float, opt_end: float) -> None:
    """One iteration of one rank as trace spans: compute per action, its input wait and its sends, the optimizer."""
    t0 = rec.start_s
    what = {"F": "activation", "B": "gradient"}
    for kind, i, ready, start, end in rec.actions:
        args = {"allocator": allocator, "iteration": iteration, "micro_batch": i}
        if start > ready:
            recorder.span("communication", f"wait {what[kind]} {i}", t0 + ready, t0 + start, **args)
        recorder.span("compute", f"{kind} {i}", t0 + start, t0 + end, **args)
    for kind, i, posted, done in rec.sends:
        recorder.span("communication", f"send {what[kind]} {i}", t0 + posted, t0 + done,
                      allocator=allocator, iteration=iteration, micro_batch=i)
    recorder.span("optimizer", "step", opt_start, opt_end, allocator=allocator, iteration=iteration)


class PipelineJob(Job):
    """Pipeline-parallel training of a BERT-style model, one stage per rank, under the shared lifecycle."""

    prog = "hpcbench pipeline"
    kind = PIPELINE.kind
    description = ("Train a BERT-style encoder stack as a pipeline (one stage per MPI rank) under each\n"
                   "configured layer allocator (even, sky-dynamic, sky-milp, optimal, adaptive) side by side,\n"
                   "on heterogeneous (emulated or stretched) devices; writes HDF5.")
    epilog = "Every config key can be overridden: --allocators '[even, optimal]' --devices.speed 4:1"

    def add_arguments(self, parser) -> None:
        from hpcbench.pipeline.config import PipelineConfig
        from hpcbench.runtime.config import add_config_arguments

        add_config_arguments(parser, PipelineConfig)

    def configure(self, args) -> None:
        from hpcbench.pipeline.config import load_config
        from hpcbench.runtime.config import config_overrides

        self.cfg = load_config(args.config, config_overrides(args))
        cfg, p = self.cfg, self.comm.size
        if cfg.model.layers + 3 < p:
            raise InputError(f"model.layers: {cfg.model.layers} encoder layers (+3) cannot fill {p} stages")
        if cfg.compute == "real" and cfg.time_dilation != 1.0:
            raise InputError(f"time_dilation: {cfg.time_dilation} needs compute: emulated (real compute "
                             f"cannot be dilated)")

    def memory_need(self):
        from hpcbench.pipeline.model import memory_need

        cfg = self.cfg
        return memory_need(cfg, cfg.batch_size // cfg.micro_batches, cfg.compute == "real" or self.comm.rank == 0)

    def prepare(self) -> None:
        import torch

        from hpcbench.allocation import Instance, allocate
        from hpcbench.pipeline.adaptive import START
        from hpcbench.pipeline.devices import memory_caps, speed_factors
        from hpcbench.pipeline.model import build_layers
        from hpcbench.pipeline.profiler import profile_layers, profile_links
        from hpcbench.runtime.config import section_options
        from hpcbench.runtime.dilation import TimeDilation
        from hpcbench.runtime.wait import sleep_bcast

        from hpcbench.runtime.device import select_device

        torch.set_num_threads(1)
        cfg, comm, p = self.cfg, self.comm, self.comm.size
        real = cfg.compute == "real"
        # rank 0 profiles the layers on its device; emulated stages compute nothing
        self.device = select_device(comm, cfg.device, "device", needed=real or comm.rank == 0)
        self.dilation = TimeDilation(cfg.time_dilation)
        self.micro_batch = cfg.batch_size // cfg.micro_batches
        self.factors = speed_factors(cfg.devices.speed, p, cfg.seed)
        self.final_factors = (speed_factors(cfg.devices.change_speed, p, cfg.seed, "devices.change_speed")
                              if cfg.devices.change_speed is not None and cfg.devices.change_at else self.factors)
        caps = memory_caps(cfg.devices.mem_cap_mb, p)
        self.layers = build_layers(cfg.model, cfg.seed) if real or comm.rank == 0 else None
        prof = (profile_layers(self.layers, cfg.model, self.micro_batch, cfg.seed, device=self.device)
                if comm.rank == 0 else None)
        self.profile = sleep_bcast(comm, prof)
        if not real:
            self.layers = None
        self.fwd, self.bwd = self._transports()
        if cfg.link.kind == "model":
            from hpcbench.collectives.linkmodel import parse_rate

            spb = np.full(p, 8.0 / parse_rate(cfg.link.bandwidth))
            latency = cfg.link.latency_s
        else:
            spb = profile_links(comm, self.fwd, int(self.profile.out_bytes.max()))
            latency = 0.0
        self.measured_link_s_per_byte = spb
        prof = self.profile
        self.instance = Instance(prof.time_s, prof.mem_bytes, prof.out_bytes, self.factors, caps, spb, latency,
                                 cfg.micro_batches, prof.forward_fraction)
        allocs, error = None, None
        if comm.rank == 0:
            try:
                allocs = {}
                for section in cfg.allocators:
                    name = section.name
                    base = START if name == "adaptive" else name
                    allocs[name] = allocate(base, self.instance, cfg.schedule, **section_options(section))
            except InputError as exc:
                error = f"allocators: {exc}"
        allocs, error = sleep_bcast(comm, (allocs, error))
        if error:
            raise InputError(error)
        self.allocations = allocs

    def _transports(self):
        from hpcbench.collectives.transport import Transport

        cfg, comm = self.cfg, self.comm
        if cfg.link.kind == "model":
            from hpcbench.collectives.linkmodel import LinkTransport, parse_rate

            d = cfg.time_dilation  # dilate the link: latency x d, bandwidth / d
            rate = parse_rate(cfg.link.bandwidth) / d
            return (LinkTransport(comm, cfg.link.latency_s * d, rate),
                    LinkTransport(comm, cfg.link.latency_s * d, rate))
        return Transport(comm.Dup()), Transport(comm.Dup())

    def output(self):
        return self.cfg.output, {"job_name": self.cfg.job_name}

    def config_record(self):
        return self.cfg.model_dump()

    def provenance(self) -> dict:
        from hpcbench.runtime.gpuinfo import gpu_provenance

        cfg = self.cfg
        return dict(**gpu_provenance(self.device), job_name=cfg.job_name, compute_mode=cfg.compute, time_dilation=cfg.time_dilation,
                    stages=self.comm.size, pipeline_layers=cfg.model.layers + 3, schedule=cfg.schedule,
                    micro_batches=cfg.micro_batches, micro_batch=self.micro_batch,
                    speed_factors=",".join(f"{x:.4g}" for x in self.factors),
                    final_speed_factors=",".join(f"{x:.4g}" for x in self.final_factors))

    def _stage(self, bounds, order, slowdown_of, layers_by_index):
        from hpcbench.pipeline.stage import Stage

        cfg, k = self.cfg, self.comm.rank
        first, last = int(bounds[k]), int(bounds[k + 1])
        mods = [layers_by_index[j] for j in range(first, last)] if layers_by_index is not None else None
        return Stage(cfg.model, mods, first, last, k, self.comm.size, self.micro_batch, self.fwd, self.bwd,
                     cfg.compute, float(slowdown_of[order[k]]), self.profile.time_s,
                     self.profile.forward_fraction, self.dilation, self.device)

    def run(self, results) -> int:
        import torch

        from hpcbench.allocation import allocate, simulate
        from hpcbench.pipeline.adaptive import move_layers, rebalance
        from hpcbench.pipeline.model import synthetic_batch
        from hpcbench.runtime.wait import sleep_barrier, sleep_bcast

        cfg, comm, p = self.cfg, self.comm, self.comm.size
        k = comm.rank
        tables = _tables(results) if k == 0 else None
        recorder = None
        if cfg.chrome_trace is not False:
            from hpcbench.results.chrome_trace import TraceRecorder

            sleep_barrier(comm)
            recorder = TraceRecorder(k, self.dilation.now())
        if k == 0:
            print(f"{self.prog}: {p} stages, {cfg.model.layers + 3} layers, {cfg.schedule}, m={cfg.micro_batches}, "
                  f"compute {cfg.compute}, dilation {cfg.time_dilation:g}, speeds "
                  f"{np.round(self.factors, 2).tolist()[:8]}{'...' if p > 8 else ''}")
            print(f"{'allocator':<12} {'predicted(s)':>12} {'measured(s)':>12} {'err%':>6} {'speedup':>8} "
                  f"{'solve(s)':>9}  layers/stage")
        final_opt = allocate("optimal", self.instance.with_slowdown(self.final_factors), cfg.schedule)
        measured_even = math.nan
        step = 0
        total = cfg.warmup + cfg.iterations
        for name, alloc in self.allocations.items():
            bounds, order = alloc.bounds.copy(), alloc.order.copy()
            layers = ({j: copy.deepcopy(self.layers[j]) for j in range(bounds[k], bounds[k + 1])}
                      if self.layers is not None else None)
            speeds = self.factors
            stage = self._stage(bounds, order, speeds, layers)
            times, rebalances, last_rec = [], 0, None
            for it in range(1, total + 1):
                step += 1
                fault_point(step)
                if cfg.devices.change_at and it == cfg.devices.change_at:
                    speeds = self.final_factors
                    stage.slowdown = float(speeds[order[k]])
                opt = None
                if layers is not None:
                    opt = torch.optim.SGD([q for m in layers.values() for q in m.parameters()], lr=cfg.lr)
                ids, labels = synthetic_batch(cfg.model, cfg.batch_size, cfg.seed, it)
                sleep_barrier(comm)
                rec = stage.run_iteration(ids if k == 0 else None, labels if k == p - 1 else None,
                                          cfg.micro_batches, cfg.schedule)
                t_opt = self.dilation.now()
                if opt is not None:
                    opt.step()
                    opt.zero_grad(set_to_none=True)
                if recorder is not None:
                    _trace_iteration(recorder, rec, name, it, t_opt, self.dilation.now())
                sleep_barrier(comm)
                gathered = comm.gather((rec.duration_s, rec.loss, rec.busy_s(), rec.actions), root=0)
                busy = None
                if k == 0:
                    dur = max(g[0] for g in gathered)
                    busy = np.array([g[2] for g in gathered])
                    warm = it <= cfg.warmup
                    if not warm:
                        times.append(dur)
                    tables[1].append(dict(allocator=name, iteration=it, warmup=warm, time_s=dur,
                                          loss=gathered[-1][1], bubble_fraction=1 - busy.sum() / (p * dur),
                                          layers_per_stage=",".join(map(str, np.diff(bounds)))))
                    last_rec = gathered
                if (name == "adaptive" and it % cfg.adaptive.every == 0 and rebalances < cfg.adaptive.max_rebalances
                        and it < total):
                    new = rebalance(self.instance, bounds, order, busy, cfg.schedule) if k == 0 else None
                    new_bounds = sleep_bcast(comm, None if new is None else new.bounds)
                    if not np.array_equal(new_bounds, bounds):
                        if layers is not None:
                            layers = move_layers(comm, layers, bounds, new_bounds)
                        bounds = new_bounds
                        stage = self._stage(bounds, order, speeds, layers)
                        rebalances += 1
            if k == 0:
                measured = float(np.median(times))
                final = float(np.median(times[-cfg.adaptive.every:]))
                if name == "even":
                    measured_even = measured
                self._report(tables, name, alloc, bounds, order, measured, final, final_opt, rebalances,
                             measured_even, last_rec)
        if recorder is not None:
            self._write_trace(results, recorder)
        return 0

    def _write_trace(self, results, recorder) -> None:
        """Gather every rank's trace events to rank 0 and write them (collective)."""
        from hpcbench.results.chrome_trace import write_run_trace

        path = self.output_path("chrome_trace") if self.comm.rank == 0 else None
        write_run_trace(self.comm, recorder, results, path, "pipeline", self.prog)

    def outputs(self, results):
        from hpcbench.results.chrome_trace import trace_output

        trace = trace_output(self.cfg.chrome_trace, results)
        return () if trace is None else (trace,)

    def _report(self, tables, name, alloc, bounds, order, measured, final, final_opt, rebalances,
                measured_even, gathered):
        p = self.comm.size
        lps = ",".join(map(str, np.diff(bounds)))
        tables[0].append(dict(allocator=name, stages=p, layers_per_stage=lps,
                              device_order=",".join(map(str, order)), solve_s=alloc.solve_s,
                              bottleneck_s=alloc.bottleneck_s, predicted_iteration_s=alloc.predicted_iteration_s,
                              measured_iteration_s=measured, measured_final_s=final,
                              predicted_optimal_final_s=final_opt.predicted_iteration_s, rebalances=rebalances))
        rows = [(s, *a) for s, g in enumerate(gathered) for a in g[3]]
        tables[2].append(dict(allocator=[name] * len(rows), stage=[r[0] for r in rows],
                              action=[r[1] for r in rows], micro_batch=[r[2] for r in rows],
                              ready_s=[r[3] for r in rows], start_s=[r[4] for r in rows],
                              end_s=[r[5] for r in rows]))
        err = 100 * (measured / alloc.predicted_iteration_s - 1)
        speedup = measured_even / measured if measured_even == measured_even else float("nan")
        extra = f"  (final {final:.4g} s vs optimal {final_opt.predicted_iteration_s:.4g} s, {rebalances} re-balances)" \
            if name == "adaptive" else ""
        print(f"{name:<12} {alloc.predicted_iteration_s:>12.4g} {measured:>12.4g} {err:>+6.1f} {fmt(speedup, '.2f', 'no even'):>8} "
              f"{alloc.solve_s:>9.3g}  {lps if len(lps) < 60 else lps[:57] + '...'}{extra}")
        sys.stdout.flush()

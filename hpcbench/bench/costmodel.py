"""Cost-model check: measured allreduce times over the link model against the alpha-beta model.

``mpiexec -n P python -m hpcbench.bench.costmodel [--links 10Gbit,1Gbit] [--alphas 5e-5,1e-4]
[--sizes-mb 1,10,100] [--algorithms ring,rabenseifner,...] [--dilation D] [--reps N]``

For every link rate, latency, size and algorithm, the ranks run
``hpcbench.collectives.allreduce`` (float32 sum) over a
:class:`~hpcbench.collectives.linkmodel.LinkTransport` (optionally time-dilated
by ``D``) and rank 0 prints, per row, the measured time (median over ``--reps``
of the slowest rank's wall time, divided by ``D``), the prediction of
:func:`hpcbench.collectives.cost.predict_allreduce` and their ratio. ``gamma``
(reduction seconds per byte) is measured once on this node (``np.add`` over
the largest buffer, divided by ``D``) and given to the model, or set with
``--gamma``. ``cpu`` is the process CPU time over the wall time of the timed
calls (largest over ranks): where it nears 1 the ranks were CPU-bound (copies
and reductions on busy cores), the limit the model leaves out.

``--link-scope between_hosts`` models only the messages between hosts (run on
several hosts, real or emulated: docs/running.md): messages inside a host go
through shared memory as they are, and the prediction is the two-level one of
:func:`hpcbench.collectives.linkcost.predict_allreduce_hosts`, with the
intra-host link taken as free (its real cost is what the ratio then shows).
"""

from __future__ import annotations

import sys
import time

import numpy as np

from hpcbench.bench.costmodel_declaration import COSTMODEL
from hpcbench.lifecycle import Job
from hpcbench.runtime.config import parse_finite
from hpcbench.runtime.errors import InputError
from hpcbench.runtime.faults import fault_point

__all__ = ["CostModelJob", "COLUMNS", "main"]

#: (name, dtype, units, description) of the ``results`` table
COLUMNS = [("link", "float64", "bit/s", "modelled link rate"),
           ("alpha", "float64", "s", "modelled per-message latency"),
           ("size", "int64", "B", "buffer bytes per rank"),
           ("ranks", "int64", "1", "world size"),
           ("algorithm", "str", "", "allreduce algorithm"),
           ("dilation", "float64", "1", "time-dilation factor"),
           ("measured", "float64", "s", "median over reps of max-over-ranks wall time / dilation"),
           ("predicted", "float64", "s", "predict_allreduce(algorithm, size, ranks, alpha, 8/link, gamma)"),
           ("ratio", "float64", "1", "measured / predicted"),
           ("gamma", "float64", "s/B", "reduction time per byte given to the model"),
           ("cpu", "float64", "1", "process CPU / wall time of the timed calls, largest over ranks"),
           ("busbw", "float64", "B/s", "bus bandwidth: 2 (ranks-1)/ranks size / measured"),
           ("hosts", "str", "", "ranks per host, e.g. 2+2"),
           ("scope", "str", "", "which messages were modelled: all, or between_hosts")]


def _floats(text: str, key: str, parse=parse_finite) -> list:
    try:
        vals = [parse(v) for v in str(text).split(",") if v.strip()]
    except ValueError as exc:
        raise InputError(f"{key}: {exc} (got {text!r})") from None
    if not vals:
        raise InputError(f"{key}: empty list")
    return vals


class CostModelJob(Job):
    """Measured allreduce over the link model against :func:`predict_allreduce`."""

    prog = "hpcbench costmodel"
    kind = COSTMODEL.kind
    description = __doc__

    def add_arguments(self, parser) -> None:
        parser.add_argument("--links", default="10Gbit,1Gbit", help="comma list of link rates")
        parser.add_argument("--alphas", default="5e-5,1e-4", help="comma list of latencies (s)")
        parser.add_argument("--sizes-mb", default="1,10,100", help="comma list of buffer sizes (MB)")
        parser.add_argument("--algorithms", default="ring,rabenseifner,recursive_doubling,tree,star",
                            help="comma list of registered algorithms (or auto)")
        parser.add_argument("--dilation", type=float, default=1.0, help="time-dilation factor >= 1")
        parser.add_argument("--reps", type=int, default=3, help="timed calls per row (median)")
        parser.add_argument("--link-scope", choices=("all", "between_hosts"), default="all",
                            help="model every message (all) or only those between hosts (between_hosts: "
                                 "two-level prediction, intra-host messages taken as free)")
        parser.add_argument("--gamma", default="measure",
                            help="reduction s/byte given to the model, or 'measure' (default)")
        parser.add_argument("--output", default="results/costmodel-{start}.h5",
                            help="HDF5 result file template ({start} is the start time)")

    def configure(self, args) -> None:
        from hpcbench.collectives import algorithms
        from hpcbench.collectives.linkmodel import parse_rate
        from hpcbench.runtime.dilation import TimeDilation

        links = _floats(args.links, "links", parse_rate)
        alphas = _floats(args.alphas, "alphas")
        sizes = _floats(args.sizes_mb, "sizes-mb")
        if any(not (a >= 0) for a in alphas):
            raise InputError(f"alphas: latencies must be >= 0 s, got {args.alphas!r}")
        if any(not (0 < s <= 4096) for s in sizes):
            raise InputError(f"sizes-mb: sizes must be in (0, 4096] MB, got {args.sizes_mb!r}")
        algs = [a.strip() for a in args.algorithms.split(",") if a.strip()]
        for a in algs:
            if a != "auto":
                try:
                    algorithms.get(a)
                except ValueError as exc:
                    raise InputError(f"algorithms: {exc}") from None
        if not algs:
            raise InputError("algorithms: empty list")
        try:
            dilation = TimeDilation(args.dilation)
        except ValueError as exc:
            raise InputError(f"dilation: {exc}") from None
        if args.reps < 1:
            raise InputError(f"reps: must be >= 1, got {args.reps}")
        gamma = None
        if args.gamma != "measure":
            gamma = _floats(args.gamma, "gamma")[0]
            if not gamma >= 0:
                raise InputError(f"gamma: must be >= 0 s/B, got {args.gamma!r}")
        self.cfg = dict(links=links, alphas=alphas, sizes=[int(s * 1e6) // 4 * 4 for s in sizes],
                        algorithms=algs, dilation=dilation, reps=args.reps, gamma=gamma,
                        output=args.output, scope=args.link_scope)
        if min(self.cfg["sizes"]) < 4:
            raise InputError(f"sizes-mb: {min(sizes):g} MB is less than one float32 element (4e-06 MB)")
        self._check_run_time(args.reps)

    def _check_run_time(self, reps: int) -> None:
        """Refuse settings whose modelled calls alone exceed :data:`~hpcbench.runtime.budget.MAX_RUN_S` of wall time.

        Every row runs ``--reps`` + 1 allreduces, each at least its cost-model
        prediction without the reduction (``gamma`` 0) or the call floor,
        stretched by ``--dilation``; with ``--link-scope between_hosts`` (on
        one host nothing may be modelled) the call floor alone.
        """
        from hpcbench.collectives.cost import link_beta, predict_allreduce
        from hpcbench.runtime.budget import call_floor_s, check_run_time

        c, p = self.cfg, self.comm.size
        modelled = c["scope"] == "all"
        least = sum(max(predict_allreduce(alg, size, p, alpha, link_beta(rate)) if modelled else 0.0,
                        call_floor_s(size))
                    for rate in c["links"] for alpha in c["alphas"] for size in c["sizes"] for alg in c["algorithms"])
        rows = len(c["links"]) * len(c["alphas"]) * len(c["sizes"]) * len(c["algorithms"])
        check_run_time((reps + 1) * least * c["dilation"].factor,
                       f"--reps {reps}, --dilation {c['dilation'].factor:g} over {rows} rows at {p} ranks")

    def output(self):
        return self.cfg["output"], {}

    def memory_need(self):
        """Three buffers of the largest ``--sizes-mb`` per rank (input, output, the algorithm's scratch) and the
        float64 seconds of ``--reps`` calls (gathered from every rank)."""
        from hpcbench.runtime.memory import MemoryNeed

        biggest = max(self.cfg["sizes"])
        times = 2 * 8 * self.cfg["reps"] * (1 + self.comm.size)   # wall and CPU seconds, and their gather
        return MemoryNeed(3 * biggest + times, f"--sizes-mb {biggest / 1e6:g}, --reps {self.cfg['reps']}")

    def config_record(self):
        c = dict(self.cfg)
        c["dilation"] = c["dilation"].factor
        c["gamma"] = "measure" if c["gamma"] is None else c["gamma"]
        return c

    def provenance(self) -> dict:
        return {"time_dilation": self.cfg["dilation"].factor, "compute_mode": "none",
                "transport": "LinkTransport (hpcbench.collectives.linkmodel)"}

    def _gamma(self) -> float:
        """Reduction seconds per byte in modelled time: ``np.add`` timed here / dilation."""
        if self.cfg["gamma"] is not None:
            return self.cfg["gamma"]
        n = max(self.cfg["sizes"]) // 4
        a, b = np.ones(n, np.float32), np.ones(n, np.float32)
        best = min(_timed(lambda: np.add(a, b, out=a)) for _ in range(3))
        g = max(self.comm.allgather(best)) / (4 * n)
        return self.cfg["dilation"].to_model(g)

    def run(self, results) -> int:
        import hpcbench.collectives as hc
        from hpcbench.collectives.cost import link_beta, predict_allreduce
        from hpcbench.collectives.linkcost import HostLinks, predict_allreduce_hosts
        from hpcbench.collectives.linkmodel import LinkTransport
        from hpcbench.results import Column
        from hpcbench.runtime.hosts import host_groups
        from hpcbench.runtime.wait import sleep_barrier

        comm, cfg = self.comm, self.cfg
        p, dil = comm.size, cfg["dilation"]
        layout = tuple(len(g) for g in host_groups(comm))
        scope = cfg["scope"]

        def predict(alg, size, alpha, rate, gamma):
            if scope == "between_hosts":
                return predict_allreduce_hosts(alg, size, HostLinks(layout, 0.0, 0.0, alpha, link_beta(rate)), gamma)
            return predict_allreduce(alg, size, p, alpha, link_beta(rate), gamma)
        say = print if comm.rank == 0 else (lambda *a, **k: None)
        table = results.table("results", [Column(*c) for c in COLUMNS],
                              "measured allreduce over the link model against the cost model") \
            if results is not None else None
        gamma = self._gamma()
        say(f"# hpcbench costmodel: ranks={p} hosts={'+'.join(map(str, layout))} scope={scope} "
            f"dilation={dil.factor:g} reps={cfg['reps']} gamma={gamma:.3g} s/B (float32 sum over LinkTransport)")
        say(f"# {'link':>8} {'alpha':>8} {'size':>10} {'algorithm':>18} {'measured':>11} "
            f"{'predicted':>11} {'ratio':>6} {'cpu':>5}")
        say(f"# {'(Gbit/s)':>8} {'(s)':>8} {'(B)':>10} {'':>18} {'(ms)':>11} {'(ms)':>11} "
            f"{'':>6} {'':>5}")
        step = 0
        for rate in cfg["links"]:
            for alpha in cfg["alphas"]:
                lt = LinkTransport(comm, alpha=alpha, beta=rate, dilation=dil, scope=scope)
                try:
                    for size in cfg["sizes"]:
                        x = np.full(size // 4, 1.0 + comm.rank, dtype=np.float32)
                        out = np.empty_like(x)
                        for alg in cfg["algorithms"]:
                            step += 1
                            fault_point(step)
                            hc.allreduce(x, out, algorithm=alg, transport=lt)      # warm-up
                            walls, cpus = [], []
                            for _ in range(cfg["reps"]):
                                sleep_barrier(comm)
                                comm.Barrier()
                                c0, t0 = time.process_time(), time.perf_counter()
                                hc.allreduce(x, out, algorithm=alg, transport=lt)
                                walls.append(time.perf_counter() - t0)
                                cpus.append(time.process_time() - c0)
                            worst = np.max(comm.allgather(walls), axis=0)
                            cpu = max(comm.allgather(sum(cpus) / max(sum(walls), 1e-12)))
                            if not np.allclose(out, p * (p + 1) / 2):
                                raise RuntimeError(f"{alg}: wrong allreduce result")
                            measured = dil.to_model(float(np.median(worst)))
                            pred = predict(alg, size, alpha, rate, gamma)
                            ratio = measured / pred if pred > 0 else float("nan")
                            say(f"  {rate / 1e9:>8g} {alpha:>8.2g} {size:>10} {alg:>18} "
                                f"{measured * 1e3:>11.3f} {pred * 1e3:>11.3f} {ratio:>6.3f} "
                                f"{cpu:>5.2f}")
                            if table is not None:
                                table.append({"link": rate, "alpha": alpha, "size": size,
                                              "ranks": p, "algorithm": alg,
                                              "dilation": dil.factor, "measured": measured,
                                              "predicted": pred, "ratio": ratio,
                                              "gamma": gamma, "cpu": cpu,
                                              "busbw": 2 * (p - 1) / p * size / measured if measured > 0 else 0.0,
                                              "hosts": "+".join(map(str, layout)), "scope": scope})
                finally:
                    lt.free()
        return 0


def _timed(f) -> float:
    t0 = time.perf_counter()
    f()
    return time.perf_counter() - t0


def main(argv: list[str] | None = None) -> int:
    """Entry point (``hpcbench costmodel``): the shared lifecycle with :class:`CostModelJob`."""
    from hpcbench.lifecycle import main as run_main

    return run_main("hpcbench.bench.costmodel:CostModelJob", argv)


if __name__ == "__main__":
    sys.exit(main())

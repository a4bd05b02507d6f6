"""StellaTrain's time-to-accuracy claims on a real-data task, one MPI job: dense, fixed rates, the controller.

Every run trains ``--model`` (the digits CNN by default; real compute, same
seed and learning rate) over the MobiPerf WAN replay scaled to ``--wan``
(100 Mbit/s: StellaTrain's setting) with ``--speed`` heterogeneous workers
(2:1: every other rank sleeps as long again after each forward and backward),
and the held-out accuracy of rank 0's replica is read after every iteration
(``--steps-per-iter`` steps). The runs, in this order:

1. ``ddp``: hpcbench's dense ring allreduce with DDP's bucket overlap;
2. ``topk-R`` for each ``--rates`` R: top-k with error feedback at a fixed
   kept fraction (the sweep for the best fixed rate);
3. ``thresholdv-R`` for each R: threshold-v at the same rates (the report
   reads it at the best fixed rate ``R*``);
4. ``controller``: top-k from ``R*`` (the seed's best fixed rate: the one of
   least time to target; the most accurate if none reaches it) with the
   ``stellatrain`` policy (per-worker batch sizes and kept fraction); and
   ``--staleness`` adds
   ``topk-R*`` and the controller again with ``staleness: 1`` (StellaTrain
   3.3's pipeline), each in one job interleaved with its staleness-0
   twin (``interleave_sync``; ``topk-s0``/``topk-s1``,
   ``controller-s0``/``controller-s1``, these two with the CPU sparse
   optimizer, plain SGD), so that load drifts fall on both alike;
   ``--scale-lr`` adds ``controller-lr``: the controller with the policy's
   ``scale_lr`` (learning rate x global batch / starting global batch);
   ``--control`` adds ``large-topk-R*``: top-k at ``R*`` with every worker
   at ``--max-batch`` and the learning rate scaled by the batch as
   ``scale_lr`` would (the controller's largest batches, held fixed).

``--seeds 0,1,2`` runs that whole set for each seed in turn (every run of
seed 0, then of seed 1, ...: the runs compared are interleaved over the
seeds, so that load drifts fall on every side alike); threshold-v runs at
every swept rate (the analysis takes the rate the sweep chose over all
seeds). ``--warm`` first runs one discarded iteration
of each kind of run (dense, top-k, threshold-v, controller), so that the
process's one-off costs (the first use of each path) fall on no measured run.

It prints, per run: steps, samples/s over all workers, final accuracy, and
the time to ``--target`` accuracy (modelled seconds: the steps' ``step_s``
summed up to the end of the first iteration at or above the target), then
``analysis/stellatrain_tta_seeds.py``'s report: the best fixed rate chosen
by the sweep (least median time over the seeds), each reference over each
controller per seed with the median and range (target >= 1.3x), and
staleness 1 against 0. Every run's HDF5 file is kept
(``--out``-sSEED-NAME.h5); ``analysis/plot_stellatrain_tta.py`` draws
accuracy against time and ``analysis/stellatrain_tta_seeds.py`` prints the
report again from the files.

    mpiexec -n 2 python scripts/stellatrain_tta.py --out results/st-tta --seeds 0,1,2 --warm --scale-lr
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from mpi4py import MPI

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "analysis"))


def main() -> int:
    from plot_stellatrain_tta import accuracy_curves, time_to

    from hpcbench.lifecycle import run
    from hpcbench.train.job import TrainJob

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--wan", default="100Mbit")
    ap.add_argument("--trace-interval", type=float, default=0.05, help="seconds per trace level")
    ap.add_argument("--out", default="results/st-tta")
    ap.add_argument("--model", default="digits_cnn")
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--max-batch", type=int, default=32)
    ap.add_argument("--lr", type=float, default=0.1)
    ap.add_argument("--iters", type=int, default=40)
    ap.add_argument("--steps-per-iter", type=int, default=5)
    ap.add_argument("--rates", default="0.3,0.1,0.03,0.01")
    ap.add_argument("--target", type=float, default=0.85)
    ap.add_argument("--speed", default="2:1")
    ap.add_argument("--staleness", action="store_true", help="also the staleness-1 runs (item: pipelining)")
    ap.add_argument("--scale-lr", action="store_true", help="also the controller with linear learning-rate scaling")
    ap.add_argument("--estimator", default="delivered", help="the stellatrain policy's bandwidth estimator")
    ap.add_argument("--only-staleness", action="store_true", help="only the staleness pairs at --rates' first")
    ap.add_argument("--seeds", default="0", help="comma-separated seeds: the whole set runs for each seed in turn "
                                                "(runs of one seed, then the next: interleaved over the seeds)")
    ap.add_argument("--control", action="store_true", help="also large-topk-R*: top-k at R* with every worker at "
                                                          "--max-batch and the learning rate scaled by the batch")
    ap.add_argument("--warm", action="store_true", help="first one discarded iteration of each kind of run (the "
                                                       "process's one-off costs of each path)")
    args = ap.parse_args()
    comm = MPI.COMM_WORLD
    speed = f"'{args.speed}'" if ":" in args.speed else args.speed      # YAML reads a bare 2:1 as 121
    base = ["--model", args.model, "--batch_size", str(args.batch), "--lr", str(args.lr), "--speed", speed,
            "--link.kind", "model", "--link.wan_mean", args.wan, "--link.trace_interval_s", str(args.trace_interval),
            "--progress", "false", "--warmup", "0", "--batches_per_iter", str(args.steps_per_iter),
            "--bucket_mb", "1", "--profile_steps", "1", "--overwrite"]
    seeds = [int(x) for x in args.seeds.split(",")]
    files: dict[str, str] = {}
    rc = 0

    def job(name, sync, *extra, seed=seeds[0], iters=args.iters, prefix=None):
        nonlocal rc
        path = f"{prefix or args.out}-s{seed}-{name}.h5"
        rc |= run(TrainJob, [*base, "--seed", str(seed), "--iterations", str(iters), "--sync", sync, *extra,
                             "--output", path], comm=comm)
        if prefix is None:
            files[f"s{seed}-{name}"] = path

    def policy(ratio, extra=""):
        return ["--policies", f"[{{name: stellatrain, max_batch: {args.max_batch}, min_batch: 4, "
                              f"initial_ratio: {ratio}, estimator: {args.estimator}{extra}}}]"]

    def topk(ratio, label, extra=""):
        return f"{{name: compressed, compressor: {{name: topk, ratio: {ratio}}}, label: {label}{extra}}}"

    def thresholdv(ratio):
        return f"[{{name: compressed, compressor: {{name: thresholdv, ratio: {ratio}}}, label: thresholdv-{ratio:g}}}]"

    rates = [float(r) for r in args.rates.split(",")]
    if args.warm:       # the process's one-off costs (first use of each path), in files set apart and never read
        for name, sync, extra in (("ddp", "[{name: ring, label: ddp}]", ()),
                                  ("topk", f"[{topk(rates[0], 'topk')}]", ()),
                                  ("thresholdv", thresholdv(rates[0]), ()),
                                  ("controller", f"[{topk(rates[0], 'controller')}]", policy(rates[0]))):
            job(name, sync, *extra, iters=1, prefix=f"{args.out}-warm")
    for seed in seeds:
        if args.only_staleness:
            best = rates[0]
        else:
            job("ddp", "[{name: ring, label: ddp}]", seed=seed)
            for r in rates:
                job(f"topk-{r:g}", f"[{topk(r, f'topk-{r:g}')}]", seed=seed)
            if comm.allreduce(rc, op=MPI.MAX):
                return rc
            best = _best(files, [f"topk-{r:g}" for r in rates], seed, args.target, comm)
            for r in rates:
                job(f"thresholdv-{r:g}", thresholdv(r), seed=seed)
            job("controller", f"[{topk(best, 'controller')}]", *policy(best), seed=seed)
            if args.control:
                job(f"large-topk-{best:g}", f"[{topk(best, f'large-topk-{best:g}')}]", "--batch_size",
                    str(args.max_batch), "--lr", f"{args.lr * args.max_batch / args.batch:g}", seed=seed)
            if args.scale_lr:
                job("controller-lr", f"[{topk(best, 'controller-lr')}]", *policy(best, ", scale_lr: true"),
                    seed=seed)
        if args.staleness or args.only_staleness:
            job("topk-stale", f"[{topk(best, 'topk-s0')}, {topk(best, 'topk-s1', ', staleness: 1')}]",
                "--interleave_sync", "true", seed=seed)
            sparse = ", optimizer: {name: sgd}"       # StellaTrain's CPU sparse optimizer (plain SGD: the dense maths)
            job("controller-stale", f"[{topk(best, 'controller-s0', sparse)}, "
                                    f"{topk(best, 'controller-s1', sparse + ', staleness: 1')}]",
                "--interleave_sync", "true", *policy(best), seed=seed)
    if rc or comm.rank:
        return rc
    print(f"{args.model}, {comm.size} workers ({args.speed}), batch {args.batch} per worker, lr {args.lr}, link "
          f"MobiPerf WAN at a mean of {args.wan} ({args.trace_interval:g} s per level), target accuracy "
          f"{args.target}")
    from stellatrain_tta_seeds import collect, report

    print(f"{'seed':>4} {'run':<20} {'steps':>5} {'samples/s':>10} {'final acc':>9} {'time to target (s)':>19}")
    curves = {}
    for key, path in files.items():
        seed = key.split("-", 1)[0]
        for label, c in accuracy_curves(path).items():
            curves[seed, label] = c
            print(f"{seed:>4} {label:<20} {c['steps']:>5} {c['samples_per_s']:>10.1f} {c['accuracy'][-1]:>9.3f} "
                  f"{time_to(c, args.target):>19.2f}")
    if not args.only_staleness:
        print("\n".join(report(*collect([p for k, p in files.items() if not k.endswith("-stale")], args.target),
                                args.target, 1.3)))
    for seed in dict.fromkeys(k[0] for k in curves):
        for a, b in (("topk-s0", "topk-s1"), ("controller-s0", "controller-s1")):
            if (seed, b) in curves:
                ca, cb = curves[seed, a], curves[seed, b]
                ta, tb = time_to(ca, args.target), time_to(cb, args.target)
                print(f"{seed} staleness 1 against 0 ({a.split('-')[0]}, interleaved): throughput "
                      f"{cb['samples_per_s'] / ca['samples_per_s']:.2f}x, time to target {tb:.2f} s against "
                      f"{ta:.2f} s ({tb / ta:.2f}x), final accuracy {cb['accuracy'][-1]:.3f} against "
                      f"{ca['accuracy'][-1]:.3f}")
    print(f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    return 0


def _best(files, names, seed, target, comm) -> float:
    """The fixed rate of least time to ``target`` in ``seed``'s runs (none reaching it: the most accurate), on
    every rank.

    Raises
    ------
    SystemExit
        On every rank, when rank 0 cannot read a run (status 1).
    """
    best, error = None, None
    if comm.rank == 0:
        from plot_stellatrain_tta import accuracy_curves, time_to

        try:
            scored = []
            for n in names:
                c = accuracy_curves(files[f"s{seed}-{n}"])[n]
                scored.append((time_to(c, target), -c["accuracy"][-1], float(n.split("-", 1)[1])))
            best = min(scored)[2]
        except (OSError, KeyError, ValueError) as exc:
            error = f"stellatrain_tta: cannot read the fixed-rate runs: {exc}"
    best, error = comm.bcast((best, error), root=0)
    if error:
        print(error, file=sys.stderr)
        raise SystemExit(1)
    return best


if __name__ == "__main__":
    sys.exit(main())

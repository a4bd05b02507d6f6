"""Rank 0's recorder, a hook of the step loop: step rows to HDF5, KungFu's printed lines, per-entry summaries."""

from __future__ import annotations

import math
from collections import defaultdict

import numpy as np

from hpcbench.runtime.texttable import render
from hpcbench.train.steps.hooks import Hook
from hpcbench.train.synchronisation.predict import link_cost, predict_step
from hpcbench.train.reporting.tables import STEP_FIELDS

__all__ = ["Report", "step_row"]

_F = {name: i for i, name in enumerate(STEP_FIELDS)}


def step_row(gathered: np.ndarray, batch_sizes) -> dict:
    """The ``steps`` columns from every rank's numbers ``gathered`` (shape ``(p, len(STEP_FIELDS))``) and every
    worker's batch size in the step.

    The step takes as long as its slowest rank; ``wait_s`` of a rank is how
    much longer the slowest rank computed; the exposed communication beyond
    that wait is ``comm_exposed_s``. Samples per second count the step's
    samples over all workers (``sum(batch_sizes)``), per worker their mean.
    ``policy_s`` is the policies' critical path: the slowest rank's hook
    calls plus the agreement exchange as the quickest rank saw it (the rank
    that arrives last waits least in it, so its time is the exchange's own
    cost, not a wait for the others); ``telemetry_s`` the slowest rank's.
    """
    g = gathered
    p = g.shape[0]
    compute, span, exposed = g[:, _F["compute_s"]], g[:, _F["comm_span_s"]], g[:, _F["exposed_s"]]
    step = float(np.max(g[:, _F["step_s"]]))
    wait = np.max(compute) - compute
    samples = int(sum(batch_sizes))
    with np.errstate(invalid="ignore", divide="ignore"):
        hidden = np.where(span > 0, 1.0 - np.clip(exposed, 0, None) / span, np.nan)
    return dict(step_s=step, compute_s=float(np.mean(compute)), comm_span_s=float(np.mean(span)),
                comm_exposed_s=float(np.mean(np.clip(exposed - wait, 0, None))), wait_s=float(np.mean(wait)),
                hidden_fraction=float(np.clip(np.nanmean(hidden), 0, 1)) if np.any(np.isfinite(hidden))
                else math.nan,
                monitor_s=float(np.mean(g[:, _F["monitor_s"]])),
                policy_s=float(np.max(g[:, _F["policy_calls_s"]]) + np.min(g[:, _F["policy_agree_s"]])),
                telemetry_s=float(np.max(g[:, _F["telemetry_s"]])), workers=p, global_batch=samples, batch_size=samples / p,
                samples_per_s_worker=samples / p / step, samples_per_s_total=samples / step,
                loss=float(np.mean(g[:, _F["loss"]])), local_sq_norm=float(g[0, _F["local_sq_norm"]]))


class Report(Hook):
    """Writes the tables and prints KungFu's lines on rank 0 (a hook of every entry's run there).

    Parameters
    ----------
    setup : hpcbench.train.steps.context.TrainSetup
        The job's prepared setup (profile, buckets, link, settings).
    tables : dict
        From :func:`hpcbench.train.reporting.tables.make_tables`.
    monitor_columns : list of str
    progress : hpcbench.train.steps.hooks.Progress
        Rank 0's bar, through which lines are printed.
    tag_entries : bool
        Tag each ``Iter`` line with its entry (several entries' iterations interleave).
    clock : hpcbench.train.steps.stepclock.ModelledClock, optional
        ``step_clock: {kind: modelled}``: fills each step's ``modelled_step_s`` (else NaN).
    """

    def __init__(self, setup, tables: dict, monitor_columns: list[str], progress, tag_entries: bool,
                 clock=None) -> None:
        self.setup, self.settings, self.clock = setup, setup.settings, clock
        self.tables, self.monitor_columns, self.progress = tables, monitor_columns, progress
        self.tag_entries = tag_entries
        self.world_size = setup.comm.size
        self._rows: dict = defaultdict(list)        # (sync, variant, iteration) -> step rows
        self._iters: dict = defaultdict(list)       # (sync, variant) -> img/s per iteration
        self._acc: dict = {}
        self.summaries: list[dict] = []
        #: the entries' labels in the configured order (the comparison's rows follow it)
        self.entry_order: list[str] = []
        #: policy name -> the table of its decisions' details (its class's ``detail_table``)
        self.detail_tables: dict[str, str] = {}

    # -- hooks -----------------------------------------------------------------------------------
    def before_train(self, ctx) -> None:
        """Print the entry's heading (with its priority schedule's bucket order)."""
        note = ""
        if self.setup.link.modelled and not ctx.sync.uses_transport:
            note = " [its bytes bypass the modelled link]"
        if ctx.order is not None:
            note += f" [priority schedule, bucket order {' '.join(map(str, ctx.order))}]"
        warmup = self.settings.warmup
        self.progress.write(f"== {ctx.label}: {ctx.sync.describe()}{note}")
        self.progress.write(f"Running warmup ({warmup} steps)..." if warmup else "No warmup")

    def after_step(self, ctx, telemetry) -> None:
        """Record one step (``iteration`` -1 in warm-up); close the iteration at its last step."""
        info = ctx.info
        row = step_row(telemetry.ranks, telemetry.batch_sizes)
        row.update(sync=ctx.label, variant=info.variant, iteration=info.iteration, step=info.step,
                   warmup=info.iteration < 0)
        row.update({c: float(telemetry.monitors.get(c, math.nan)) for c in self.monitor_columns})
        row["modelled_step_s"] = (self.clock.step_s(ctx.sync, telemetry.batch_sizes) if self.clock is not None
                                  else math.nan)
        self.tables["steps"].append(row)
        if info.iteration >= 0:
            self._rows[(ctx.label, info.variant, info.iteration)].append({**row, "sizes": telemetry.batch_sizes})
            if info.last:
                self._iteration(ctx.label, info.variant, info.iteration, ctx.evaluate())

    def after_train(self, ctx) -> None:
        """Summaries of each variant; KungFu's closing lines (an elastic run's at its final worker count)."""
        self.world_size = ctx.comm.size
        self._finish(ctx.label, ctx.sync, ctx.plan.variants, ctx.order)

    def on_decision(self, ctx, applied) -> None:
        """One ``decisions`` row, and a line, per decision applied."""
        self.tables["decisions"].append(applied.row(ctx.label))
        d = applied.decision
        if d.detail is not None:
            from hpcbench.results.records import rows_of

            table = self.tables[self.detail_tables[applied.policy]]
            table.append({"sync": [ctx.label], **rows_of([d.detail])})
        what = ", ".join(f"{k} {v}" for k, v in d.changes().items())
        self.progress.write(f"Policy {applied.policy}: {what} from step {applied.step}"
                            + (f" ({d.reason})" if d.reason else ""))

    # -- lines and summaries ---------------------------------------------------------------------
    def _iteration(self, sync: str, variant: str, iteration: int, accuracy: float) -> None:
        """Close a measured iteration: KungFu's ``Iter #i: X img/sec per worker`` line."""
        rows = self._rows[(sync, variant, iteration)]
        img = sum(r["batch_size"] for r in rows) / sum(r["step_s"] for r in rows)
        self._iters[(sync, variant)].append(img)
        self._acc[(sync, variant)] = accuracy
        self.tables["iterations"].append(dict(sync=sync, variant=variant, iteration=iteration,
                                              img_per_s_worker=img, accuracy=accuracy))
        tag = self._tag(sync, variant, self.settings.interleave_monitors)
        acc = f", accuracy {accuracy:.3f}" if accuracy == accuracy else ""
        self.progress.write(f"Iter #{iteration}: {img:.1f} img/sec per worker{tag}{acc}")

    def _tag(self, sync: str, variant: str, with_variant: bool) -> str:
        """`` [sync, variant]`` where lines of several entries or variants interleave, else ``""``."""
        tags = [sync] if self.tag_entries else []
        tags += [variant] if with_variant else []
        return f" [{', '.join(tags)}]" if tags else ""

    def _predict(self, sync, order) -> tuple[float, float, float]:
        setup = self.setup
        if not sync.uses_transport:
            return math.nan, math.nan, math.nan
        prof, plan = setup.profile, setup.plan
        ready = (plan.ready_times(prof.param_ready_s) if self.settings.overlap
                 else np.full(len(plan.buckets), prof.backward_s))
        return predict_step(prof, plan.nbytes, ready, link_cost(sync, self.world_size, setup.link.alpha_s,
                                                                 setup.link.beta_s_per_byte,
                                                                 setup.link.ranks_per_host),
                            sync.averages, "fifo" if order is None else "priority", setup.bucket_need_s,
                            sync.mix_memory_s(prof))

    def _step_compute(self, rows) -> np.ndarray:
        """Each step's compute without communication, seconds: measured when real (mean over ranks); the
        profile at each worker's batch when emulated (the slowest worker's)."""
        if self.settings.compute != "emulated":
            return np.array([r["compute_s"] for r in rows])
        prof, b0 = self.setup.profile, self.settings.batch_size
        return np.array([max(prof.at_batch(b / b0).compute_s for b in r["sizes"]) for r in rows])

    def _ideal(self, rows, pooled: bool) -> float:
        """Samples per second over all workers without communication: each step's samples over its compute
        (:meth:`_step_compute`). ``pooled`` (the worker count changed: an elastic run): the steps' samples
        over the sum of their compute, as :meth:`_efficiency` pools the measured rate."""
        batch = np.array([r["global_batch"] for r in rows], dtype=float)
        compute = self._step_compute(rows)
        if pooled:
            return float(batch.sum() / compute.sum())
        if self.settings.compute != "emulated":
            return float(batch.mean() / compute.mean())
        per_step = batch / compute
        return float(per_step[0]) if len(set(per_step)) == 1 else float(np.mean(per_step))   # equal: exactly

    def _efficiency(self, rows, mean_per_worker: float, ideal: float, pooled: bool) -> float:
        """Measured over ideal throughput: the job's workers times the per-worker rate, or, ``pooled`` (the
        worker count changed: an elastic run, whose ``workers`` is the final count), the steps' samples over
        the sum of their times, pooled as :meth:`_ideal` pools the ideal."""
        if pooled:
            total = sum(r["global_batch"] for r in rows) / sum(r["step_s"] for r in rows)
            return total / ideal
        return self.world_size * mean_per_worker / ideal

    def _finish(self, name: str, sync, variant_names: list[str], order=None) -> None:
        pred_step, pred_eff, pred_comm = self._predict(sync, order)
        schedule = "fifo" if order is None else "priority " + " ".join(map(str, order))
        base = base_monitor = base_step = None
        for v in variant_names:
            imgs = np.array(self._iters[(name, v)])
            rows = [r for (s, vv, _), rs in self._rows.items() if s == name and vv == v for r in rs]
            step = float(np.mean([r["step_s"] for r in rows]))
            compute = float(np.mean([r["compute_s"] for r in rows]))
            pooled = len({r["workers"] for r in rows}) > 1      # an elastic run's worker count changed
            ideal = self._ideal(rows, pooled)
            mean, ci = float(imgs.mean()), float(1.96 * imgs.std())
            monitor = float(np.mean([r["monitor_s"] for r in rows]))
            if v == "none":
                base, base_monitor, base_step = mean, monitor, step
            overhead = 1.0 - mean / base if base and v != "none" else math.nan
            cost = (monitor - base_monitor) / base_step if base and v != "none" else math.nan
            hidden = [r["hidden_fraction"] for r in rows if r["hidden_fraction"] == r["hidden_fraction"]]
            s = dict(sync=name, variant=v, status="ok", workers=self.world_size, img_per_s_worker=mean,
                     img_per_s_worker_ci=ci, img_per_s_total=self.world_size * mean, step_s=step, compute_s=compute,
                     ideal_img_per_s_total=ideal, efficiency=self._efficiency(rows, mean, ideal, pooled),
                     hidden_fraction=float(np.mean(hidden)) if hidden else math.nan,
                     predicted_step_s=pred_step, predicted_efficiency=pred_eff, predicted_comm_s=pred_comm,
                     comm_span_s=float(np.mean([r["comm_span_s"] for r in rows])),
                     policy_s=float(np.mean([r["policy_s"] for r in rows])),
                     telemetry_s=float(np.mean([r["telemetry_s"] for r in rows])), monitor_overhead=overhead,
                     monitor_s=monitor, monitor_cost=cost, final_accuracy=self._acc.get((name, v), math.nan),
                     schedule=schedule)
            self.tables["summary"].append(s)
            self.summaries.append(s)
            tag = self._tag(name, v, len(variant_names) > 1)
            say = self.progress.write
            say(f"Img/sec per worker{tag}: {mean:.1f} +-{ci:.1f}")
            say(f"Total img/sec on {self.world_size} worker(s){tag}: {self.world_size * mean:.1f} +-{self.world_size * ci:.1f}")
            extra = (f", monitor overhead {100 * overhead:+.1f}% (timed in the monitor: {1e3 * monitor:.1f} ms per "
                     f"step, {100 * cost:+.1f}% of the step without it)" if overhead == overhead else "")
            comm = f"communication {1e3 * s['comm_span_s']:.1f} ms per step"
            if s["efficiency"] != s["efficiency"]:
                say(f"efficiency and communication n/a: {name} hides its compute and communication "
                    f"(it wraps the model and optimizer){extra}")
                continue
            if pred_eff == pred_eff:
                said = (f"efficiency {s['efficiency']:.3f} of ideal (predicted {pred_eff:.3f}), {comm} (alpha-beta, "
                        f"one after the other: {1e3 * pred_comm:.1f} ms)")
            else:
                why = ("its bytes bypass the modelled link" if self.setup.link.modelled else "no link model")
                said = f"efficiency {s['efficiency']:.3f} of ideal (prediction n/a: {why}), {comm}"
            h = s["hidden_fraction"]
            hidden = f"{100 * h:.0f}% hidden" if h == h else "hidden share n/a (no communication measured)"
            say(f"{said}, {hidden}{extra}")

    def skipped(self, name: str, reason: str, schedule: str) -> None:
        """An entry that cannot run here: one line, and a summary row saying why."""
        self.progress.write(f"== {name}: skipped ({reason})")
        nan = math.nan
        self.tables["summary"].append(dict(
            sync=name, variant="none", status=f"skipped: {reason}"[:500], workers=self.world_size, img_per_s_worker=nan,
            img_per_s_worker_ci=nan, img_per_s_total=nan, step_s=nan, compute_s=nan, ideal_img_per_s_total=nan,
            efficiency=nan, hidden_fraction=nan, predicted_step_s=nan, predicted_efficiency=nan, predicted_comm_s=nan,
            comm_span_s=nan, policy_s=nan, telemetry_s=nan, monitor_overhead=nan, monitor_s=nan, monitor_cost=nan,
            final_accuracy=nan, schedule=schedule))

    def comparison(self) -> None:
        """The entries side by side, with each one's throughput over the first one's."""
        if len(self.summaries) < 2:
            return
        if self.entry_order:        # interleaved entries finish in their last round's order
            self.summaries.sort(key=lambda s: self.entry_order.index(s["sync"]))
        first = self.summaries[0]["img_per_s_worker"]
        rows = [(s["sync"], s["variant"], s["img_per_s_worker"], s["img_per_s_total"], s["efficiency"],
                 s["predicted_efficiency"], 100 * s["hidden_fraction"], s["img_per_s_worker"] / first)
                for s in self.summaries]
        for line in render(("sync", "variant", "img/s/worker", "total", "eff", "pred", "hidden %", "x first"), rows,
                           formats=("s", "s", ".1f", ".1f", ".3f", ".3f", ".0f", ".3f")):
            self.progress.write(line)

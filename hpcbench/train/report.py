"""Rank 0's recorder: step rows to HDF5, KungFu's printed lines, per-synchroniser summaries."""

from __future__ import annotations

import math
import sys
from collections import defaultdict

import numpy as np

from hpcbench.runtime.texttable import fmt, render
from hpcbench.train.predict import predict_step
from hpcbench.train.tables import STEP_FIELDS

__all__ = ["Report", "step_row"]

_F = {name: i for i, name in enumerate(STEP_FIELDS)}


def step_row(gathered: np.ndarray, batch: int) -> dict:
    """The ``steps`` columns from every rank's numbers ``gathered`` (shape ``(p, len(STEP_FIELDS))``).

    The step takes as long as its slowest rank; ``wait_s`` of a rank is how
    much longer the slowest rank computed; the exposed communication beyond
    that wait is ``comm_exposed_s``.
    """
    g = gathered
    p = g.shape[0]
    compute, span, exposed = g[:, _F["compute_s"]], g[:, _F["comm_span_s"]], g[:, _F["exposed_s"]]
    step = float(np.max(g[:, _F["step_s"]]))
    wait = np.max(compute) - compute
    with np.errstate(invalid="ignore", divide="ignore"):
        hidden = np.where(span > 0, 1.0 - np.clip(exposed, 0, None) / span, np.nan)
    return dict(step_s=step, compute_s=float(np.mean(compute)), comm_span_s=float(np.mean(span)),
                comm_exposed_s=float(np.mean(np.clip(exposed - wait, 0, None))), wait_s=float(np.mean(wait)),
                hidden_fraction=float(np.clip(np.nanmean(hidden), 0, 1)) if np.any(np.isfinite(hidden))
                else math.nan,
                monitor_s=float(np.mean(g[:, _F["monitor_s"]])), samples_per_s_worker=batch / step,
                samples_per_s_total=p * batch / step, loss=float(np.mean(g[:, _F["loss"]])),
                local_sq_norm=float(g[0, _F["local_sq_norm"]]))


class Report:
    """Writes the tables and prints KungFu's lines on rank 0.

    Parameters
    ----------
    job : hpcbench.train.job.TrainJob
    tables : dict
        From :func:`hpcbench.train.tables.make_tables`.
    monitor_columns : list of str
    """

    def __init__(self, job, tables: dict, monitor_columns: list[str]) -> None:
        self.job, self.tables, self.monitor_columns = job, tables, monitor_columns
        self.cfg = job.cfg
        self.p = job.comm.size
        self._rows: dict = defaultdict(list)        # (sync, variant, iteration) -> step rows
        self._iters: dict = defaultdict(list)       # (sync, variant) -> img/s per iteration
        self._acc: dict = {}
        self.summaries: list[dict] = []

    def start(self, total_steps: int) -> None:
        """Open rank 0's progress over every step of the job (a tqdm bar on a terminal, else lines)."""
        from hpcbench.runtime.progress import progress_bar

        self.bar = progress_bar(total_steps, unit="step", file=sys.stderr, disable=not self.cfg.progress,
                                leave=False, dynamic_ncols=True)

    def close(self) -> None:
        """Close the bar."""
        self.bar.close()

    def start_sync(self, name: str, sync, order=None) -> None:
        """Print the synchroniser's heading (``order``: its priority schedule's bucket order, or None)."""
        note = ""
        if self.cfg.link.kind == "model" and not sync.uses_transport:
            note = " [its bytes bypass the modelled link]"
        if order is not None:
            note += f" [priority schedule, bucket order {' '.join(map(str, order))}]"
        self.bar.write(f"== {name}: {sync.describe()}{note}", file=sys.stdout)
        self.bar.write(f"Running warmup ({self.cfg.warmup} steps)..." if self.cfg.warmup else "No warmup",
                       file=sys.stdout)

    def step(self, sync: str, variant: str, iteration: int, t: int, gathered, monitor_values: dict) -> None:
        """Record one step (``iteration`` -1 in warm-up)."""
        row = step_row(gathered, self.cfg.batch_size)
        row.update(sync=sync, variant=variant, iteration=iteration, step=t, warmup=iteration < 0)
        row.update({c: float(monitor_values.get(c, math.nan)) for c in self.monitor_columns})
        self.tables["steps"].append(row)
        self.bar.update(1)
        if iteration >= 0:
            self._rows[(sync, variant, iteration)].append(row)

    def iteration(self, sync: str, variant: str, iteration: int, accuracy: float) -> None:
        """Close a measured iteration: KungFu's ``Iter #i: X img/sec per worker`` line."""
        rows = self._rows[(sync, variant, iteration)]
        img = self.cfg.batch_size * len(rows) / sum(r["step_s"] for r in rows)
        self._iters[(sync, variant)].append(img)
        self._acc[(sync, variant)] = accuracy
        self.tables["iterations"].append(dict(sync=sync, variant=variant, iteration=iteration,
                                              img_per_s_worker=img, accuracy=accuracy))
        tag = self._tag(sync, variant, self.cfg.interleave_monitors)
        acc = f", accuracy {accuracy:.3f}" if accuracy == accuracy else ""
        self.bar.write(f"Iter #{iteration}: {img:.1f} img/sec per worker{tag}{acc}", file=sys.stdout)

    def _tag(self, sync: str, variant: str, with_variant: bool) -> str:
        """`` [sync, variant]`` where lines of several synchronisers or variants interleave, else ``""``."""
        tags = [sync] if self.cfg.interleave_sync and len(self.cfg.sync) > 1 else []
        tags += [variant] if with_variant else []
        return f" [{', '.join(tags)}]" if tags else ""

    def _predict(self, sync, order) -> tuple[float, float, float]:
        job = self.job
        if not sync.uses_transport:
            return math.nan, math.nan, math.nan
        prof = job.profile
        ready = (job.plan.ready_times(prof.param_ready_s) if self.cfg.overlap
                 else np.full(len(job.plan.buckets), prof.backward_s))
        return predict_step(prof, job.plan.nbytes, ready, sync.cost_model, self.p, job.alpha, job.beta,
                            sync.averages, "fifo" if order is None else "priority", job.bucket_need_s)

    def finish_sync(self, name: str, sync, variant_names: list[str], order=None) -> None:
        """Summaries of each variant; KungFu's closing lines (``order`` as :meth:`start_sync`)."""
        pred_step, pred_eff, pred_comm = self._predict(sync, order)
        schedule = "fifo" if order is None else "priority " + " ".join(map(str, order))
        base = None
        for v in variant_names:
            imgs = np.array(self._iters[(name, v)])
            rows = [r for (s, vv, _), rs in self._rows.items() if s == name and vv == v for r in rs]
            step = float(np.mean([r["step_s"] for r in rows]))
            compute = float(np.mean([r["compute_s"] for r in rows]))
            per_worker = self.job.profile.compute_s if self.cfg.compute == "emulated" else compute
            ideal = self.p * self.cfg.batch_size / per_worker
            mean, ci = float(imgs.mean()), float(1.96 * imgs.std())
            if v == "none":
                base = mean
            overhead = 1.0 - mean / base if base and v != "none" else math.nan
            hidden = [r["hidden_fraction"] for r in rows if r["hidden_fraction"] == r["hidden_fraction"]]
            s = dict(sync=name, variant=v, status="ok", workers=self.p, img_per_s_worker=mean,
                     img_per_s_worker_ci=ci, img_per_s_total=self.p * mean, step_s=step, compute_s=compute,
                     ideal_img_per_s_total=ideal, efficiency=self.p * mean / ideal,
                     hidden_fraction=float(np.mean(hidden)) if hidden else math.nan,
                     predicted_step_s=pred_step, predicted_efficiency=pred_eff, predicted_comm_s=pred_comm,
                     comm_span_s=float(np.mean([r["comm_span_s"] for r in rows])), monitor_overhead=overhead,
                     final_accuracy=self._acc.get((name, v), math.nan), schedule=schedule)
            self.tables["summary"].append(s)
            self.summaries.append(s)
            tag = self._tag(name, v, len(variant_names) > 1)
            say = self._say
            say(f"Img/sec per worker{tag}: {mean:.1f} +-{ci:.1f}")
            say(f"Total img/sec on {self.p} worker(s){tag}: {self.p * mean:.1f} +-{self.p * ci:.1f}")
            extra = f", monitor overhead {100 * overhead:+.1f}%" if overhead == overhead else ""
            comm = f"communication {1e3 * s['comm_span_s']:.1f} ms per step"
            if s["efficiency"] != s["efficiency"]:
                say(f"efficiency and communication n/a: {name} hides its compute and communication "
                    f"(it wraps the model and optimizer){extra}")
                continue
            if pred_eff == pred_eff:
                said = (f"efficiency {s['efficiency']:.3f} of ideal (predicted {pred_eff:.3f}), {comm} (alpha-beta, "
                        f"one after the other: {1e3 * pred_comm:.1f} ms)")
            else:
                why = ("its bytes bypass the modelled link" if self.cfg.link.kind == "model" else "no link model")
                said = f"efficiency {s['efficiency']:.3f} of ideal (prediction n/a: {why}), {comm}"
            h = s["hidden_fraction"]
            hidden = f"{100 * h:.0f}% hidden" if h == h else "hidden share n/a (no communication measured)"
            say(f"{said}, {hidden}{extra}")
        sys.stdout.flush()

    def _say(self, line: str) -> None:
        """A line on stdout, under the progress bar while it is open (``tqdm.write``)."""
        bar = getattr(self, "bar", None)
        if bar is not None:
            bar.write(line, file=sys.stdout)
        else:
            print(line)

    def skipped(self, name: str, reason: str) -> None:
        """A synchroniser that cannot run here: one line, and a summary row saying why."""
        self._say(f"== {name}: skipped ({reason})")
        nan = math.nan
        self.tables["summary"].append(dict(
            sync=name, variant="none", status=f"skipped: {reason}"[:500], workers=self.p, img_per_s_worker=nan,
            img_per_s_worker_ci=nan, img_per_s_total=nan, step_s=nan, compute_s=nan, ideal_img_per_s_total=nan,
            efficiency=nan, hidden_fraction=nan, predicted_step_s=nan, predicted_efficiency=nan, predicted_comm_s=nan,
            comm_span_s=nan, monitor_overhead=nan, final_accuracy=nan,
            schedule=dict((e, sch) for e, _, sch in self.cfg.sync_entries()).get(name, self.cfg.schedule)))

    def comparison(self) -> None:
        """The synchronisers side by side, with each one's throughput over the first one's."""
        if len(self.summaries) < 2:
            return
        first = self.summaries[0]["img_per_s_worker"]
        rows = [(s["sync"], s["variant"], s["img_per_s_worker"], s["img_per_s_total"], s["efficiency"],
                 s["predicted_efficiency"], 100 * s["hidden_fraction"], s["img_per_s_worker"] / first)
                for s in self.summaries]
        for line in render(("sync", "variant", "img/s/worker", "total", "eff", "pred", "hidden %", "x first"), rows,
                           formats=("s", "s", ".1f", ".1f", ".3f", ".3f", ".0f", ".3f")):
            self._say(line)
        sys.stdout.flush()

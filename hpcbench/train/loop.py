"""One synchroniser's run: warm-up, then measured iterations of ``batches_per_iter`` steps (KungFu's recipe).

With ``interleave_monitors`` the measured iterations cycle through the
variants ``none``, then each monitor alone (figure 8: the same model keeps
training; each variant's throughput comes from the iterations it ran, so slow
drifts of the machine's load fall on every variant alike).
"""

from __future__ import annotations

from hpcbench.runtime.lifecycle import fault_point
from hpcbench.runtime.heap import trim_heap

__all__ = ["SyncRun", "variants"]


def variants(monitors, interleave: bool) -> list[tuple[str, list]]:
    """``(name, monitors)`` of each variant: all monitors together, or none and each alone in turn."""
    if interleave:
        return [("none", []), *((m.name, [m]) for m in monitors)]
    return [("+".join(m.name for m in monitors) or "none", list(monitors))]


class SyncRun:
    """Train a fresh replica (same seed on every rank) with synchroniser ``sync``.

    Parameters
    ----------
    job : hpcbench.train.job.TrainJob
        Prepared job (config, profile, data, dilation).
    name : str
        Synchroniser name.
    sync : hpcbench.sync.Synchroniser
    report : hpcbench.train.report.Report or None
        Rank 0's recorder (None elsewhere).
    schedule : {"fifo", "priority"}
        Bucket schedule (:mod:`hpcbench.train.priority`).
    """

    def __init__(self, job, name: str, sync, report, schedule: str = "fifo") -> None:
        cfg = job.cfg
        self.job, self.name, self.sync, self.report = job, name, sync, report
        self.worker = None      # built by execute(): one replica's buffers alive at a time unless interleaved
        self.monitors = []
        if cfg.monitors:    # the monitors import torch
            from hpcbench.monitors import build_monitor

            self.monitors = [build_monitor(m, interval=cfg.monitor_interval) for m in cfg.monitors]
        self.variants = variants(self.monitors, cfg.interleave_monitors)
        self.order = job.bucket_order(sync, schedule)     # None: FIFO

    def _build_worker(self):
        """This synchroniser's replica: the real model, or the emulated timeline on numpy buffers (no torch
        in the process unless rank 0 profiled the model)."""
        cfg, job, sync = self.job.cfg, self.job, self.sync
        if cfg.compute == "real":
            from hpcbench.train.models import build_model
            from hpcbench.train.worker import Worker

            return Worker(build_model(cfg.model, cfg.seed), sync, job.profile, job.data, cfg.batch_size,
                          cfg.lr, job.bucket_bytes, cfg.overlap, job.dilation, self.order)
        from hpcbench.train.emulated import EmulatedWorker

        return EmulatedWorker(sync, job.profile, job.bucket_bytes, cfg.overlap, job.dilation, self.order)

    def total_steps(self) -> int:
        """Warm-up plus measured steps."""
        cfg = self.job.cfg
        return cfg.warmup + cfg.iterations * len(self.variants) * cfg.batches_per_iter

    def execute(self):
        """Run every step; a generator that yields after the warm-up and after each measured iteration, so
        that the job can run several synchronisers' iterations in turn (``interleave_sync``)."""
        from hpcbench.train.job import _gather

        cfg, job = self.job.cfg, self.job
        self.worker = self._build_worker()
        n_iter = cfg.iterations * len(self.variants)
        if self.report is not None:
            self.report.start_sync(self.name, self.sync, self.order)
        schedule = [(-1, self.variants[0])] * cfg.warmup
        for it in range(n_iter):
            schedule += [(it, self.variants[it % len(self.variants)])] * cfg.batches_per_iter
        for t, (it, (vname, mons)) in enumerate(schedule):
            job.steps_done += 1
            fault_point(job.steps_done)
            rec = self.worker.step(t, [m for m in mons if m.due(t)])
            gathered = _gather(job.comm, rec.vector())
            last = t + 1 == len(schedule) or schedule[t + 1][0] != it
            if self.report is not None:
                self.report.step(self.name, vname, it, t, gathered, rec.monitor_values)
                if it >= 0 and last:
                    acc = float("nan")
                    if self.worker.model is not None:
                        self.worker.flush()     # rank 0 only: the others' progress threads (or next forward) join it
                        acc = job.data.accuracy(self.worker.model)
                    self.report.iteration(self.name, vname, it, acc)
            if last:
                yield it
        self.worker.flush()
        if self.report is not None:
            self.report.finish_sync(self.name, self.sync, [v for v, _ in self.variants], self.order)
        self.worker.close()
        self.worker = None      # free its buffers before the next synchroniser's
        trim_heap()

    def close(self) -> None:
        """Remove hooks and close the synchroniser (collective)."""
        if self.worker is not None:
            self.worker.close()
        self.sync.close()

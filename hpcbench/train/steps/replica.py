"""The run's replica: the worker that trains a step under the active synchroniser, real or emulated.

Built by the loop before the first step and again whenever the synchroniser is rebuilt
(:mod:`hpcbench.train.synchronisation.rebuild`); both call :func:`build_worker` through this module, so that
a test or a benchmark that wraps it (``monkeypatch.setattr(replica, "build_worker", ...)``) sees every replica.
"""

from __future__ import annotations

__all__ = ["build_worker"]


def build_worker(ctx, model=None):
    """The run's replica with its active synchroniser: the real model (a new one from the seed, or ``model``,
    e.g. after a switch of synchroniser), or the emulated timeline on numpy buffers (no torch in the process
    unless rank 0 profiled the model)."""
    setup, s = ctx.setup, ctx.setup.settings
    if s.compute == "real":
        from hpcbench.train.workloads.models import build_model
        from hpcbench.train.steps.worker import Worker

        device = setup.device
        model = model if model is not None else build_model(s.model, s.seed, setup.data, s.model_options)
        if device is not None:
            model = model.to(device.torch)
        return Worker(model, ctx.sync, setup.profile, ctx.state, s.bucket_bytes, s.overlap, setup.dilation,
                      ctx.order, device=device, host_staging=s.host_staging, speed=setup.speed)
    from hpcbench.train.steps.emulated import EmulatedWorker

    profile = setup.profile if setup.speed == 1.0 else setup.profile.slowed(setup.speed)
    return EmulatedWorker(ctx.sync, profile, ctx.state, s.batch_size, s.bucket_bytes, s.overlap,
                          setup.dilation, ctx.order)

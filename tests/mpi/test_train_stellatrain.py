"""StellaTrain's controller end to end in this MPI job (any world size 1..4).

Telemetry is metered and recorded for every rank and step; the controller's
decisions (per-worker batch sizes, compression ratio) take effect on every
rank before the same step, ``effective_after`` steps after the most advanced
worker's, and every decision is recorded; the Chrome trace opens.
"""

from __future__ import annotations

import json
import time

import numpy as np
import pytest
import torch

from hpcbench.lifecycle import run
from hpcbench.results import read_table
from hpcbench.results.chrome_trace import validate
from hpcbench.train.job import TrainJob
from hpcbench.train.reporting import telemetryhook

ARGS = ["--model", "digits_mlp", "--warmup", "0", "--iterations", "2", "--batches_per_iter", "9", "--lr", "0.05",
        "--bucket_mb", "0.01", "--progress", "false", "--profile_steps", "1", "--batch_size", "8",
        "--link.kind", "model", "--link.wan_mean", "20Mbit", "--link.trace_interval_s", "0.05",
        "--sync", "[{name: compressed, compressor: {name: topk, ratio: 0.1}}]",
        "--policies", "[{name: stellatrain, max_batch: [16, 12], min_batch: 2, initial_ratio: 0.2}]",
        "--chrome_trace", "true"]


def test_controller_decides_batches_and_ratio_for_every_rank_from_metered_telemetry(comm, tmp_path_factory,
                                                                                      monkeypatch):
    torch.set_num_threads(1)
    seen = []       # (step, this rank's batch, the synchroniser's kept fraction) as each step was measured
    real = telemetryhook.TelemetryHook.measure

    def measure(self, ctx, rec):
        seen.append((ctx.info.step, ctx.state.local, ctx.sync.ratio, tuple(ctx.state.sizes)))
        return real(self, ctx, rec)

    monkeypatch.setattr(telemetryhook.TelemetryHook, "measure", measure)
    out = comm.bcast(str(tmp_path_factory.mktemp("st") / "s.h5") if comm.rank == 0 else None, root=0)
    t0 = time.perf_counter()
    assert run(TrainJob, [*ARGS, "--output", out], comm=comm) == 0
    run_wall_s = time.perf_counter() - t0
    p = comm.size
    steps = len(seen)
    assert steps == 18 and [s for s, *_ in seen] == list(range(18))
    everyone = comm.allgather([(s, sizes, kept) for s, _, kept, sizes in seen])
    assert all(v == everyone[0] for v in everyone)          # the same decisions, before the same steps
    comm.Barrier()
    if comm.rank:
        return
    tel = read_table(out, "telemetry")
    assert len(tel["step"]) == steps * p
    assert list(tel["rank"][:p]) == list(range(p)) and list(tel["step"][::p]) == list(range(steps))
    assert np.all(tel["forward_s"] > 0) and np.all(tel["backward_s"] > 0) and np.all(tel["bwd_fwd_gap_s"] >= 0)
    assert np.all(tel["grad_accumulation"] == 1)
    link = tel["link_bps"]
    assert np.all((link > 0.5 * 20e6 * 0.5) & (link < 20e6 * 1.5))     # the WAN levels span 0.51-1.46 x the mean
    if p > 1:       # bytes came in on every rank, and at most at the link's highest rate
        got = tel["recv_mean_bps"][p:] > 0      # a 1 s window: a step stretched past it by load may read 0
        assert np.mean(got) >= 0.9 and all(np.any(got[r::p]) for r in range(p))
        assert np.all(tel["recv_peak_bps"] <= 20e6 * 1.46 * 1.05)
        busy = tel["recv_busy_bps"][p:]     # the link's rate while busy: within the trace's levels
        assert np.all((busy >= 20e6 * 0.51 * 0.98) & (busy <= 20e6 * 1.46 * 1.02))
    ctl = read_table(out, "controller")
    dec = read_table(out, "decisions")
    assert len(ctl["step"]) >= 1 and list(dec["policy"].astype(str)) == ["stellatrain"] * (len(ctl["step"]) + 1)
    assert dec["step"][0] == 0 and dec["ratio"][0] == 0.2          # the initial ratio from step 0
    np.testing.assert_array_equal(dec["step"][1:], ctl["effective_step"])
    np.testing.assert_array_equal(dec["decided_step"][1:] + 3, ctl["effective_step"])      # latest + 3
    bounds = np.resize([16, 12], p)
    by_step = {s: (sizes, kept) for s, _, kept, sizes in seen}
    for eff, batches, ratio in zip(ctl["effective_step"], ctl["batch_sizes"].astype(str), ctl["ratio"]):
        b = tuple(int(x) for x in batches.split(","))
        assert len(b) == p and all(2 <= x <= u for x, u in zip(b, bounds))
        if eff < steps:
            assert by_step[eff] == (b, ratio)
            rows = tel["step"] == eff
            np.testing.assert_array_equal(tel["micro_batch"][rows], b)
            np.testing.assert_array_equal(tel["ratio"][rows], ratio)
    rows = read_table(out, "steps")       # the machinery's own time, the claims' overhead numerator
    assert np.all(np.isfinite(rows["policy_s"]) & (rows["policy_s"] > 0)) and np.all(rows["telemetry_s"] > 0)
    # seconds (not ms or ns): the machinery's time is a part of the run's, both measured in this process
    assert rows["policy_s"].sum() + rows["telemetry_s"].sum() < run_wall_s
    summary = read_table(out, "summary")
    measured = ~rows["warmup"]
    np.testing.assert_allclose(summary["policy_s"], rows["policy_s"][measured].mean())
    np.testing.assert_allclose(summary["telemetry_s"], rows["telemetry_s"][measured].mean())
    trace = json.loads(open(out.replace(".h5", ".trace.json")).read())
    validate(trace)
    names = {e["name"] for e in trace["traceEvents"]}
    assert {"forward", "backward", "optimizer"} <= names and {e["pid"] for e in trace["traceEvents"]} == set(range(p))
